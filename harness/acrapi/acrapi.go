// Package acrapi emulates the part of Alibaba Cloud Container Registry's
// API a drover node calls: GetAuthorizationToken of ACR Enterprise Edition
// (API 2018-12-01, RPC style: Action in the query, HMAC-SHA1 signature v1)
// and of ACR Personal Edition (API 2016-06-07, ROA style: GET /tokens,
// signed in the Authorization header), and Enterprise ListInstance.
//
// Every request must be signed with STS credentials the metadata emulator
// (harness/ecsmeta) issued for the instance's RAM role: the emulator looks
// the AccessKeyId up there, checks the security token and the expiry, and
// recomputes the signature with the secret, as the SDK computes it
// (alibaba-cloud-sdk-go's signers). Answers are the SDK's response types
// as JSON; refusals are the {Code, Message, RequestId} errors Alibaba
// Cloud documents (InvalidAccessKeyId.NotFound, InvalidSecurityToken.*,
// SignatureDoesNotMatch, Forbidden.RAM for a role Deny names). An unknown
// Enterprise instance is INSTANCE_NOT_EXIST, HTTP 404: ACR's code for it
// is not documented, and the provider classifies by status as well.
//
// Each issued login (TempUsername/AuthorizationToken) is recorded with the
// role it was issued to, and Check answers whether a login is one of them
// and still valid: harness/registry's token auth asks it.
package acrapi

import (
	"crypto/hmac"
	"crypto/rand"
	"crypto/sha1"
	"encoding/base64"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"net/http"
	"net/url"
	"sort"
	"strings"
	"sync"
	"time"

	"github.com/aliyun/alibaba-cloud-sdk-go/services/cr_ee"
	"github.com/drover-os/drover/harness/ecsmeta"
)

// Credentials looks up STS credentials by AccessKeyId; *ecsmeta.Server is
// one.
type Credentials interface {
	RoleCredentials(accessKeyID string) (ecsmeta.STSCredentials, bool)
}

// Instance is an emulated ACR Enterprise instance.
type Instance struct{ ID, Name, Region string }

// Login is a temporary login the emulator issued.
type Login struct {
	Username, Password string
	Role               string
	AccessKeyID        string
	InstanceID         string // "" for Personal Edition
	Region             string
	Expires            time.Time
}

// Call is one API request as the emulator judged it.
type Call struct {
	Action, Role, InstanceID string
	Code                     string // the error code answered; "" for success
}

// DefaultLoginLifetime is ACR's: a temporary password lasts an hour, and
// no longer than the STS credentials it was issued for.
const DefaultLoginLifetime = time.Hour

// Server is the emulated API; create it with New.
type Server struct {
	// LoginLifetime caps an issued login's life (DefaultLoginLifetime
	// when 0), e.g. so that a smoke test sees the kubelet ask again
	// (it caches a login until five minutes before it expires). Set it
	// before serving.
	LoginLifetime time.Duration

	creds Credentials
	now   func() time.Time

	mu        sync.Mutex
	instances map[string]Instance
	denied    map[string]bool
	logins    map[string]Login // by password
	calls     []Call
}

// New returns an API that trusts the credentials creds issued; now is the
// clock (nil: time.Now).
func New(creds Credentials, now func() time.Time) *Server {
	if now == nil {
		now = time.Now
	}
	return &Server{creds: creds, now: now, instances: map[string]Instance{}, denied: map[string]bool{}, logins: map[string]Login{}}
}

// AddInstance makes an Enterprise instance known.
func (s *Server) AddInstance(in Instance) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.instances[in.ID] = in
}

// Deny makes every call signed for role answer Forbidden.RAM (on), as when
// the role has no policy granting cr:GetAuthorizationToken.
func (s *Server) Deny(role string, on bool) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.denied[role] = on
}

// Check says whether user and password are a login this API issued and
// that has not expired, and returns it.
func (s *Server) Check(user, password string) (Login, bool) {
	s.mu.Lock()
	defer s.mu.Unlock()
	l, ok := s.logins[password]
	if !ok || l.Username != user || !s.now().Before(l.Expires) {
		return Login{}, false
	}
	return l, true
}

// Logins returns every login issued, in no order.
func (s *Server) Logins() []Login {
	s.mu.Lock()
	defer s.mu.Unlock()
	var out []Login
	for _, l := range s.logins {
		out = append(out, l)
	}
	return out
}

// Calls returns the requests judged so far, in order.
func (s *Server) Calls() []Call {
	s.mu.Lock()
	defer s.mu.Unlock()
	return append([]Call(nil), s.calls...)
}

// apiError is Alibaba Cloud's documented error body.
type apiError struct {
	status  int
	Code    string `json:"Code"`
	Message string `json:"Message"`
	ID      string `json:"RequestId"`
}

// ServeHTTP implements http.Handler.
func (s *Server) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	reqID := newID()
	var call Call
	var body any
	var aerr *apiError
	if r.Method == http.MethodGet && r.URL.Path == "/tokens" {
		call.Action = "GetAuthorizationToken (2016-06-07)"
		body, aerr = s.personal(r, &call, reqID)
	} else if err := r.ParseForm(); err != nil {
		aerr = &apiError{status: http.StatusBadRequest, Code: "InvalidParameter", Message: err.Error()}
	} else {
		call.Action = r.Form.Get("Action")
		body, aerr = s.rpc(r, &call, reqID)
	}
	w.Header().Set("Content-Type", "application/json;charset=utf-8")
	if aerr != nil {
		aerr.ID = reqID
		call.Code = aerr.Code
		s.record(call)
		w.WriteHeader(aerr.status)
		json.NewEncoder(w).Encode(aerr)
		return
	}
	s.record(call)
	json.NewEncoder(w).Encode(body)
}

func (s *Server) record(c Call) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.calls = append(s.calls, c)
}

// rpc answers an Enterprise (2018-12-01) call.
func (s *Server) rpc(r *http.Request, call *Call, reqID string) (any, *apiError) {
	f := r.Form
	if f.Get("Version") != "2018-12-01" {
		return nil, &apiError{status: http.StatusBadRequest, Code: "InvalidVersion", Message: fmt.Sprintf("Specified parameter Version %q is not valid.", f.Get("Version"))}
	}
	c, aerr := s.credentials(f.Get("AccessKeyId"), f.Get("SecurityToken"))
	if aerr != nil {
		return nil, aerr
	}
	call.Role = c.Role
	if f.Get("SignatureMethod") != "HMAC-SHA1" || f.Get("SignatureVersion") != "1.0" {
		return nil, &apiError{status: http.StatusBadRequest, Code: "InvalidSignatureMethod", Message: "only HMAC-SHA1, signature version 1.0, is emulated"}
	}
	if want := rpcSignature(r.Method, f, c.AccessKeySecret); !hmac.Equal([]byte(want), []byte(f.Get("Signature"))) {
		return nil, &apiError{status: http.StatusBadRequest, Code: "SignatureDoesNotMatch", Message: "Specified signature is not matched with our calculation."}
	}
	if aerr := s.allowed(c.Role); aerr != nil {
		return nil, aerr
	}
	region := f.Get("RegionId")
	switch call.Action {
	case "GetAuthorizationToken":
		id := f.Get("InstanceId")
		call.InstanceID = id
		s.mu.Lock()
		in, ok := s.instances[id]
		s.mu.Unlock()
		if !ok || in.Region != region {
			return nil, &apiError{status: http.StatusNotFound, Code: "INSTANCE_NOT_EXIST", Message: fmt.Sprintf("instance %s does not exist in %s", id, region)}
		}
		l := s.issue(c, id, region)
		resp := cr_ee.CreateGetAuthorizationTokenResponse()
		resp.GetAuthorizationTokenIsSuccess, resp.Code, resp.RequestId = true, "success", reqID
		resp.TempUsername, resp.AuthorizationToken, resp.ExpireTime = l.Username, l.Password, l.Expires.UnixMilli()
		return resp, nil
	case "ListInstance":
		resp := cr_ee.CreateListInstanceResponse()
		resp.ListInstanceIsSuccess, resp.Code, resp.RequestId, resp.PageNo, resp.PageSize = true, "success", reqID, 1, 100
		s.mu.Lock()
		for _, in := range s.instances {
			if in.Region == region && (f.Get("InstanceName") == "" || f.Get("InstanceName") == in.Name) {
				resp.Instances = append(resp.Instances, cr_ee.InstancesItem{InstanceId: in.ID, InstanceName: in.Name, RegionId: in.Region, InstanceStatus: "RUNNING"})
			}
		}
		s.mu.Unlock()
		resp.TotalCount = len(resp.Instances)
		return resp, nil
	}
	return nil, &apiError{status: http.StatusBadRequest, Code: "InvalidAction.NotFound", Message: fmt.Sprintf("Specified api %q is not emulated.", call.Action)}
}

// personalBody is ACR Personal Edition's documented answer to GET /tokens.
type personalBody struct {
	Data struct {
		AuthorizationToken string `json:"authorizationToken"`
		TempUserName       string `json:"tempUserName"`
		ExpireDate         int64  `json:"expireDate"`
	} `json:"data"`
	RequestID string `json:"requestId"`
}

// personal answers GET /tokens (2016-06-07, ROA).
func (s *Server) personal(r *http.Request, call *Call, reqID string) (any, *apiError) {
	akid, sig, ok := strings.Cut(strings.TrimPrefix(r.Header.Get("Authorization"), "acs "), ":")
	if !ok || !strings.HasPrefix(r.Header.Get("Authorization"), "acs ") {
		return nil, &apiError{status: http.StatusBadRequest, Code: "MissingAuthorization", Message: "Authorization header is missing or not acs <AccessKeyId>:<Signature>."}
	}
	c, aerr := s.credentials(akid, r.Header.Get("x-acs-security-token"))
	if aerr != nil {
		return nil, aerr
	}
	call.Role = c.Role
	if want := roaSignature(r, c.AccessKeySecret); !hmac.Equal([]byte(want), []byte(sig)) {
		return nil, &apiError{status: http.StatusBadRequest, Code: "SignatureDoesNotMatch", Message: "Specified signature is not matched with our calculation."}
	}
	if aerr := s.allowed(c.Role); aerr != nil {
		return nil, aerr
	}
	region := r.Header.Get("x-acs-region-id")
	l := s.issue(c, "", region)
	var b personalBody
	b.Data.AuthorizationToken, b.Data.TempUserName, b.Data.ExpireDate, b.RequestID = l.Password, l.Username, l.Expires.UnixMilli(), reqID
	return b, nil
}

// credentials finds the issued STS credentials a request is signed with.
func (s *Server) credentials(akid, token string) (ecsmeta.STSCredentials, *apiError) {
	c, ok := s.creds.RoleCredentials(akid)
	switch {
	case !ok:
		return c, &apiError{status: http.StatusNotFound, Code: "InvalidAccessKeyId.NotFound", Message: "Specified access key is not found."}
	case token == "":
		return c, &apiError{status: http.StatusBadRequest, Code: "InvalidSecurityToken.Missing", Message: "The security token is required for STS access keys."}
	case token != c.SecurityToken:
		return c, &apiError{status: http.StatusBadRequest, Code: "InvalidSecurityToken.MismatchWithAccessKey", Message: "The security token does not match the access key."}
	case !s.now().Before(c.Expiration):
		return c, &apiError{status: http.StatusBadRequest, Code: "InvalidSecurityToken.Expired", Message: "Specified SecurityToken is expired."}
	}
	return c, nil
}

func (s *Server) allowed(role string) *apiError {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.denied[role] {
		return &apiError{status: http.StatusForbidden, Code: "Forbidden.RAM", Message: fmt.Sprintf("User not authorized to operate on the specified resource, or this API does not support RAM (role %s).", role)}
	}
	return nil
}

// issue makes a login for c: an hour, no longer than c is valid.
func (s *Server) issue(c ecsmeta.STSCredentials, instanceID, region string) Login {
	life := DefaultLoginLifetime
	if s.LoginLifetime > 0 {
		life = s.LoginLifetime
	}
	exp := s.now().Add(life)
	if c.Expiration.Before(exp) {
		exp = c.Expiration
	}
	l := Login{Username: "cr_temp_user", Password: "acr-" + newID(), Role: c.Role, AccessKeyID: c.AccessKeyID,
		InstanceID: instanceID, Region: region, Expires: exp.UTC().Truncate(time.Millisecond)}
	s.mu.Lock()
	s.logins[l.Password] = l
	s.mu.Unlock()
	return l
}

// percentEncode is the RFC 3986 encoding Alibaba Cloud's RPC signature
// uses: space %20, * %2A, ~ as is.
func percentEncode(s string) string {
	e := url.QueryEscape(s)
	e = strings.ReplaceAll(e, "+", "%20")
	e = strings.ReplaceAll(e, "*", "%2A")
	return strings.ReplaceAll(e, "%7E", "~")
}

// rpcSignature is signature v1 of an RPC request: every parameter but
// Signature, sorted and encoded, signed with HMAC-SHA1 under secret+"&".
func rpcSignature(method string, params url.Values, secret string) string {
	keys := make([]string, 0, len(params))
	for k := range params {
		if k != "Signature" {
			keys = append(keys, k)
		}
	}
	sort.Strings(keys)
	pairs := make([]string, 0, len(keys))
	for _, k := range keys {
		pairs = append(pairs, percentEncode(k)+"="+percentEncode(params.Get(k)))
	}
	toSign := method + "&" + percentEncode("/") + "&" + percentEncode(strings.Join(pairs, "&"))
	return hmacSHA1(toSign, secret+"&")
}

// roaSignature is the signature of an ROA request: the method, Accept,
// Content-MD5, Content-Type and Date, the x-acs- headers sorted, and the
// path with its sorted query, signed with HMAC-SHA1 under the secret.
func roaSignature(r *http.Request, secret string) string {
	var b strings.Builder
	b.WriteString(r.Method + "\n")
	for _, h := range []string{"Accept", "Content-MD5", "Content-Type", "Date"} {
		if v := r.Header.Get(h); v != "" {
			b.WriteString(v + "\n")
		}
	}
	var acs []string
	for k := range r.Header {
		if lk := strings.ToLower(k); strings.HasPrefix(lk, "x-acs-") {
			acs = append(acs, lk)
		}
	}
	sort.Strings(acs)
	for _, k := range acs {
		b.WriteString(k + ":" + r.Header.Get(k) + "\n")
	}
	b.WriteString(r.URL.Path)
	if q := r.URL.Query(); len(q) > 0 {
		keys := make([]string, 0, len(q))
		for k := range q {
			keys = append(keys, k)
		}
		sort.Strings(keys)
		var pairs []string
		for _, k := range keys {
			if v := q.Get(k); v != "" {
				pairs = append(pairs, k+"="+v)
			} else {
				pairs = append(pairs, k)
			}
		}
		b.WriteString("?" + strings.Join(pairs, "&"))
	}
	return hmacSHA1(b.String(), secret)
}

func hmacSHA1(s, key string) string {
	m := hmac.New(sha1.New, []byte(key))
	m.Write([]byte(s))
	return base64.StdEncoding.EncodeToString(m.Sum(nil))
}

func newID() string {
	b := make([]byte, 16)
	rand.Read(b) // crypto/rand.Read never fails on Linux
	return strings.ToUpper(hex.EncodeToString(b))
}
