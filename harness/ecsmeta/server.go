package ecsmeta

import (
	"crypto/rand"
	"encoding/base64"
	"errors"
	"github.com/drover-os/drover/internal/httpstatus"
	"io"
	mrand "math/rand/v2"
	"net"
	"net/http"
	"strconv"
	"strings"
	"sync"
	"time"
)

// Header names and limits of the hardened metadata protocol.
const (
	TokenHeader    = "X-aliyun-ecs-metadata-token"
	TokenTTLHeader = "X-aliyun-ecs-metadata-token-ttl-seconds"
	MaxTokenTTL    = 21600 // seconds
	TokenPath      = "/latest/api/token"
)

// StatusClientClosed is logged for a request whose client went away while the
// emulator was delaying it (nginx's convention); nothing was sent.
const StatusClientClosed = 499

// Options fix the behaviour of the emulated service for its lifetime.
type Options struct {
	// TokenEndpoint enables PUT /latest/api/token and token checking. false
	// emulates an old service: the PUT is 404 and token headers are ignored.
	TokenEndpoint bool
	// TokenRequired emulates HttpTokens=required: a GET without a token is 403.
	// Meaningless without TokenEndpoint.
	TokenRequired bool
	// Now is the clock for token expiry and the request log; nil = time.Now.
	Now func() time.Time
	// STSLifetime is the validity of the RAM role's STS credentials
	// (DefaultSTSLifetime when 0); they are rotated halfway.
	STSLifetime time.Duration
}

// Server is the emulated metadata service. Create it with New; it is safe for
// concurrent use and its instance and faults may change while it serves.
type Server struct {
	opts Options

	mu       sync.Mutex
	inst     Instance
	faults   Faults
	rng      *mrand.Rand
	tokens   map[string]time.Time // token → expiry
	log      []Request
	stats    Stats
	servers  []*http.Server
	shutdown bool
	// current holds each role's credentials being served, issued every
	// issue by AccessKeyId (sts.go).
	current map[string]STSCredentials
	issued  map[string]STSCredentials
}

// New returns a server for inst.
func New(inst Instance, opts Options) *Server {
	s := &Server{opts: opts, inst: inst, tokens: map[string]time.Time{}}
	s.stats.ByStatus = map[int]int{}
	s.rng = newRNG(0)
	return s
}

// SetInstance replaces what the service serves, e.g. to change user-data mid-run.
func (s *Server) SetInstance(inst Instance) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.inst = inst
}

// Instance returns what the server now serves.
func (s *Server) Instance() Instance {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.inst
}

// Serve answers requests on ln until Close; it returns nil after Close.
func (s *Server) Serve(ln net.Listener) error {
	hs := &http.Server{Handler: s, ReadHeaderTimeout: 30 * time.Second}
	s.mu.Lock()
	if s.shutdown {
		s.mu.Unlock()
		ln.Close()
		return nil
	}
	s.servers = append(s.servers, hs)
	s.mu.Unlock()
	if err := hs.Serve(ln); !errors.Is(err, http.ErrServerClosed) {
		return err
	}
	return nil
}

// Close stops every Serve loop and drops open connections, which also ends
// requests held by an injected delay.
func (s *Server) Close() error {
	s.mu.Lock()
	s.shutdown = true
	servers := s.servers
	s.servers = nil
	s.mu.Unlock()
	var errs []error
	for _, hs := range servers {
		errs = append(errs, hs.Close())
	}
	return errors.Join(errs...)
}

func (s *Server) now() time.Time {
	if s.opts.Now != nil {
		return s.opts.Now()
	}
	return time.Now()
}

// ServeHTTP implements http.Handler.
func (s *Server) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	start := s.now()
	sw := &httpstatus.Writer{ResponseWriter: w}
	tokenSent := r.Header.Get(TokenHeader) != ""
	delay, injected := s.takeFaults(r.URL.Path)
	expired := false
	defer func() {
		s.record(Request{Time: start, Method: r.Method, Path: r.URL.Path, Status: sw.Status(),
			Token: tokenSent, Injected: injected != 0, Delayed: delay > 0, Expired: expired})
	}()

	if delay > 0 {
		t := time.NewTimer(delay)
		defer t.Stop()
		select {
		case <-t.C:
		case <-r.Context().Done():
			sw.Code = StatusClientClosed
			return
		}
	}
	if injected != 0 {
		http.Error(sw, http.StatusText(injected), injected)
		return
	}
	if r.URL.Path == TokenPath {
		s.serveToken(sw, r)
		return
	}
	if r.Method != http.MethodGet && r.Method != http.MethodHead {
		sw.Header().Set("Allow", "GET, HEAD")
		http.Error(sw, "method not allowed", http.StatusMethodNotAllowed)
		return
	}
	code, exp := s.authorize(r)
	if code != 0 {
		expired = exp
		http.Error(sw, http.StatusText(code), code)
		return
	}
	s.serveData(sw, r.URL.Path)
}

// serveToken implements PUT /latest/api/token.
func (s *Server) serveToken(w http.ResponseWriter, r *http.Request) {
	if !s.opts.TokenEndpoint {
		http.NotFound(w, r)
		return
	}
	if r.Method != http.MethodPut {
		w.Header().Set("Allow", http.MethodPut)
		http.Error(w, "method not allowed", http.StatusMethodNotAllowed)
		return
	}
	if r.Header.Get("X-Forwarded-For") != "" {
		http.Error(w, "token requests through a proxy are refused", http.StatusForbidden)
		return
	}
	ttl, err := strconv.Atoi(strings.TrimSpace(r.Header.Get(TokenTTLHeader)))
	if err != nil || ttl < 1 || ttl > MaxTokenTTL {
		http.Error(w, TokenTTLHeader+" must be an integer from 1 to 21600", http.StatusBadRequest)
		return
	}
	token := newToken()
	now := s.now()
	s.mu.Lock()
	life := time.Duration(ttl) * time.Second
	if o := s.faults.TokenTTLOverride; o > 0 && o < life {
		life = o
		if s.faults.TokenTTLCount > 0 {
			if s.faults.TokenTTLCount--; s.faults.TokenTTLCount == 0 {
				s.faults.TokenTTLOverride = 0 // the counted run is over
			}
		}
	}
	// Expired tokens are kept a while, so that a client presenting one is
	// counted as "expired" rather than "unknown"; the map stays small.
	for t, exp := range s.tokens {
		if now.Sub(exp) > expiredKept {
			delete(s.tokens, t)
		}
	}
	s.tokens[token] = now.Add(life)
	s.stats.TokensIssued++
	s.mu.Unlock()
	w.Header().Set(TokenTTLHeader, strconv.Itoa(ttl))
	w.Header().Set("Content-Type", "text/plain")
	io.WriteString(w, token)
}

// expiredKept is how long an expired token is still recognised as one.
const expiredKept = time.Hour

// authorize returns 0 when r may read data, else the refusal status and
// whether the refusal is for a token of ours that has expired.
func (s *Server) authorize(r *http.Request) (int, bool) {
	if !s.opts.TokenEndpoint {
		return 0, false
	}
	token := r.Header.Get(TokenHeader)
	if token == "" {
		if s.opts.TokenRequired {
			return http.StatusForbidden, false
		}
		return 0, false
	}
	s.mu.Lock()
	exp, ok := s.tokens[token]
	s.mu.Unlock()
	switch {
	case !ok:
		return http.StatusUnauthorized, false
	case !s.now().Before(exp):
		return http.StatusUnauthorized, true
	}
	return 0, false
}

// serveData answers GETs for user-data and the meta-data tree.
func (s *Server) serveData(w http.ResponseWriter, p string) {
	s.mu.Lock()
	inst := s.inst
	s.mu.Unlock()
	w.Header().Set("Content-Type", "text/plain")
	switch p {
	case "/", "/latest", "/latest/":
		body := "meta-data/"
		if inst.UserData != nil {
			body += "\nuser-data"
		}
		if p == "/" {
			body = "latest/"
		}
		io.WriteString(w, body)
		return
	case "/latest/user-data":
		if inst.UserData == nil {
			http.Error(w, "Not Found", http.StatusNotFound)
			return
		}
		w.Header().Set("Content-Type", "application/octet-stream")
		w.Write(inst.UserData)
		return
	}
	rest, ok := strings.CutPrefix(p, "/latest/meta-data")
	if !ok || (rest != "" && rest[0] != '/') {
		http.Error(w, "Not Found", http.StatusNotFound)
		return
	}
	trimmed := strings.Trim(rest, "/")
	var segs []string
	if trimmed != "" {
		segs = strings.Split(trimmed, "/")
	}
	if roleKey(inst, p) {
		s.serveRole(w, inst.RAMRole)
		return
	}
	n := inst.metaData().lookup(segs)
	switch {
	case n == nil, n.children == nil && strings.HasSuffix(rest, "/"):
		http.Error(w, "Not Found", http.StatusNotFound)
	case n.children != nil:
		io.WriteString(w, n.listing())
	default:
		if strings.HasSuffix(p, "/private-ipv4s") {
			w.Header().Set("Content-Type", "application/json")
		}
		io.WriteString(w, n.value)
	}
}

func newToken() string {
	b := make([]byte, 32)
	rand.Read(b) // crypto/rand.Read never fails on Linux
	return base64.RawURLEncoding.EncodeToString(b)
}
