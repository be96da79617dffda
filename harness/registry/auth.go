package registry

import (
	"crypto/rand"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"net/http"
	"net/http/httptest"
	"regexp"
	"strings"
	"time"
)

// Token auth for private repositories, as ACR does it (the docker
// registry token protocol): a request for a repository under the private
// prefix without a valid bearer token is answered 401 with
//
//	WWW-Authenticate: Bearer realm="http://<host>/auth",service="drover-harness",scope="repository:<repo>:pull"
//
// the client asks the realm with HTTP basic auth (for ACR, the temporary
// user and password GetAuthorizationToken issued), and gets a bearer token
// for pulls of that repository, which it sends with the retried request.
// Only pulls are granted; the harness pushes private images in-process.
// Unlike ACR, GET /v2/ stays open: the harness's public images are still
// pulled and pushed anonymously.

// AuthPath is the token realm's path on the registry's own listener.
const AuthPath = "/auth"

// AuthService is the service the realm names.
const AuthService = "drover-harness"

// bearerLifetime is how long an exchanged bearer token lasts (ACR: minutes).
const bearerLifetime = 5 * time.Minute

// CheckLogin judges a basic-auth login at the realm: who it is (for the
// log) and whether it may pull.
type CheckLogin func(user, password string) (who string, ok bool)

type bearer struct {
	who     string
	repos   []string // pull granted
	expires time.Time
}

// RequireToken makes every repository under prefix (e.g. "private/")
// private: pulls need a bearer token exchanged at AuthPath for a login
// check accepts; anything else is refused.
func (r *Registry) RequireToken(prefix string, check CheckLogin) {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.private, r.check = prefix, check
	if r.bearers == nil {
		r.bearers = map[string]bearer{}
	}
}

// repoPath matches /v2/<name>/{manifests,blobs,tags}/…
var repoPath = regexp.MustCompile(`^/v2/(.+)/(manifests|blobs|tags)/`)

// authorize decides a request for a private repository: "" and true when
// it is not for one; who and true when its bearer token allows it; false
// when it was answered (401).
func (r *Registry) authorize(w http.ResponseWriter, req *http.Request) (string, bool) {
	r.mu.Lock()
	prefix := r.private
	r.mu.Unlock()
	m := repoPath.FindStringSubmatch(req.URL.Path)
	if prefix == "" || m == nil || !strings.HasPrefix(m[1], prefix) {
		return "", true
	}
	repo := m[1]
	if tok, ok := strings.CutPrefix(req.Header.Get("Authorization"), "Bearer "); ok && (req.Method == http.MethodGet || req.Method == http.MethodHead) {
		r.mu.Lock()
		b, known := r.bearers[tok]
		r.mu.Unlock()
		if known && time.Now().Before(b.expires) && contains(b.repos, repo) {
			return b.who, true
		}
	}
	w.Header().Set("WWW-Authenticate", fmt.Sprintf(`Bearer realm="http://%s%s",service=%q,scope="repository:%s:pull"`, req.Host, AuthPath, AuthService, repo))
	registryError(w, http.StatusUnauthorized, "UNAUTHORIZED", "authentication required")
	return "", false
}

// serveAuth is the token realm: basic auth in, a pull token out.
func (r *Registry) serveAuth(w http.ResponseWriter, req *http.Request) string {
	r.mu.Lock()
	prefix, check := r.private, r.check
	r.mu.Unlock()
	user, pass, ok := req.BasicAuth()
	if check == nil || !ok {
		w.Header().Set("WWW-Authenticate", `Basic realm="drover-harness"`)
		registryError(w, http.StatusUnauthorized, "UNAUTHORIZED", "a login is required (for ACR: GetAuthorizationToken's TempUsername and AuthorizationToken)")
		return ""
	}
	who, ok := check(user, pass)
	if !ok {
		registryError(w, http.StatusUnauthorized, "UNAUTHORIZED", "the login is not valid or has expired")
		return ""
	}
	var repos []string
	for _, scope := range req.URL.Query()["scope"] {
		parts := strings.Split(scope, ":")
		if len(parts) == 3 && parts[0] == "repository" && strings.HasPrefix(parts[1], prefix) && contains(strings.Split(parts[2], ","), "pull") {
			repos = append(repos, parts[1])
		}
	}
	tok := randomToken()
	r.logger.Printf("token for %s, pull of %s", who, strings.Join(repos, " "))
	r.mu.Lock()
	r.bearers[tok] = bearer{who: who, repos: repos, expires: time.Now().Add(bearerLifetime)}
	r.mu.Unlock()
	w.Header().Set("Content-Type", "application/json")
	json.NewEncoder(w).Encode(map[string]any{"token": tok, "access_token": tok, "expires_in": int(bearerLifetime / time.Second),
		"issued_at": time.Now().UTC().Format(time.RFC3339)})
	return who
}

func registryError(w http.ResponseWriter, status int, code, msg string) {
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(status)
	json.NewEncoder(w).Encode(map[string]any{"errors": []map[string]string{{"code": code, "message": msg}}})
}

func contains(list []string, s string) bool {
	for _, x := range list {
		if x == s {
			return true
		}
	}
	return false
}

func randomToken() string {
	b := make([]byte, 24)
	rand.Read(b) // crypto/rand.Read never fails on Linux
	return hex.EncodeToString(b)
}

// inProcess carries requests straight to the registry's storage, past the
// token auth: how the harness pushes private images.
type inProcess struct{ h http.Handler }

func (t inProcess) RoundTrip(req *http.Request) (*http.Response, error) {
	rec := httptest.NewRecorder()
	if req.Body == nil { // a server's request always has one
		req = req.Clone(req.Context())
		req.Body = http.NoBody
	}
	t.h.ServeHTTP(rec, req)
	resp := rec.Result()
	resp.Request = req // the client resolves upload locations against it
	return resp, nil
}
