package ecsapi

import (
	"crypto/hmac"
	"crypto/sha1"
	"encoding/base64"
	"encoding/json"
	"fmt"
	"maps"
	"net/http"
	"net/url"
	"sort"
	"strconv"
	"strings"
	"time"
)

// obj is a JSON response body; the RPC plumbing adds RequestId.
type obj = map[string]any

// apiError is an RPC error answer: {"Code","Message","RequestId","HostId"}
// with the documented HTTP status.
type apiError struct {
	status int
	code   string
	msg    string
}

func (e *apiError) Error() string { return e.code + ": " + e.msg }

func errf(status int, code, format string, args ...any) *apiError {
	return &apiError{status: status, code: code, msg: fmt.Sprintf(format, args...)}
}

// Errors common to all RPC products (the "client errors" tables of the docs).
func errMissing(name string) *apiError {
	return errf(400, "MissingParameter", "The input parameter %q that is mandatory for processing this request is not supplied.", name)
}

func errInvalid(name string) *apiError {
	return errf(400, "InvalidParameter", "The specified parameter %q is not valid.", name)
}

// call is one RPC request being served.
type call struct {
	s      *Server
	p      url.Values
	region string
	now    time.Time
}

type action func(*call) (obj, *apiError)

// rpcHandler serves an RPC-style product: Action and Version plus the
// signature parameters in the query (or form body), a JSON answer.
func (s *Server) rpcHandler(product, version string, actions map[string]action) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		rid := newRequestID()
		var resp obj
		aerr := func() *apiError {
			if err := r.ParseForm(); err != nil {
				return errf(400, "InvalidParameter", "The request could not be parsed: %v", err)
			}
			if e := s.checkRPCAuth(r); e != nil {
				return e
			}
			if v := r.Form.Get("Version"); v != version {
				return errf(400, "InvalidVersion", "Specified parameter Version is not valid.")
			}
			fn := actions[r.Form.Get("Action")]
			if fn == nil {
				return errf(404, "InvalidAction.NotFound", "Specified api is not found, please check your url and method.")
			}
			if s.takeThrottle(r.Form.Get("Action")) {
				return errf(400, "Throttling.User", "Request was denied due to user flow control.")
			}
			c := &call{s: s, p: r.Form, region: r.Form.Get("RegionId"), now: time.Now()}
			if c.region == "" {
				c.region = s.cfg.Region
			}
			key, params := product+" "+r.Form.Get("Action")+" "+r.Form.Get("ClientToken"), requestParams(r.Form)
			if token := r.Form.Get("ClientToken"); token != "" {
				if len(token) > 64 {
					// The limit is documented; its error code is not.
					return errInvalid("ClientToken")
				}
				if prev, ok := s.earlierCall(key); ok {
					if prev.params != params {
						return errf(400, "IdempotentParameterMismatch", "The request uses the same client token as a previous, but non-identical request.")
					}
					resp = maps.Clone(prev.resp)
					return nil
				}
			}
			var e *apiError
			if resp, e = fn(c); e != nil {
				return e
			}
			if r.Form.Get("ClientToken") != "" {
				s.rememberCall(key, tokenCall{params: params, resp: maps.Clone(resp)})
			}
			s.afterCall(product, r.Form)
			if s.takeLost(r.Form.Get("Action")) {
				return errf(503, "ServiceUnavailable", "The request has failed due to a temporary failure of the server.")
			}
			return nil
		}()
		status := http.StatusOK
		if aerr != nil {
			status = aerr.status
			resp = obj{"Code": aerr.code, "Message": aerr.msg, "HostId": r.Host, "Recommend": ""}
		}
		resp["RequestId"] = rid
		w.Header().Set("Content-Type", "application/json;charset=utf-8")
		w.Header().Set("x-acs-request-id", rid)
		w.WriteHeader(status)
		_ = json.NewEncoder(w).Encode(resp)
		code := ""
		if aerr != nil {
			code = " " + aerr.code
		}
		s.logf("%s %s %d%s %s", product, r.Form.Get("Action"), status, code, rid)
	})
}

// ECSHandler serves the ECS API.
func (s *Server) ECSHandler() http.Handler {
	return s.rpcHandler("ecs", ECSVersion, map[string]action{
		"ImportImage":                        (*call).importImage,
		"DescribeImages":                     (*call).describeImages,
		"CopyImage":                          (*call).copyImage,
		"TagResources":                       (*call).tagResources,
		"CreateLaunchTemplate":               (*call).createLaunchTemplate,
		"CreateLaunchTemplateVersion":        (*call).createLaunchTemplateVersion,
		"DescribeLaunchTemplateVersions":     (*call).describeLaunchTemplateVersions,
		"DeleteLaunchTemplateVersion":        (*call).deleteLaunchTemplateVersion,
		"ModifyLaunchTemplateDefaultVersion": (*call).modifyLaunchTemplateDefaultVersion,
		"DescribeInstances":                  (*call).describeInstances,
		"GetInstanceConsoleOutput":           (*call).getInstanceConsoleOutput,
	})
}

// ESSHandler serves the Auto Scaling API.
func (s *Server) ESSHandler() http.Handler {
	return s.rpcHandler("ess", ESSVersion, map[string]action{
		"DescribeScalingGroups":     (*call).describeScalingGroups,
		"ModifyScalingGroup":        (*call).modifyScalingGroup,
		"DescribeScalingInstances":  (*call).describeScalingInstances,
		"ScaleWithAdjustment":       (*call).scaleWithAdjustment,
		"RemoveInstances":           (*call).removeInstances,
		"DescribeScalingActivities": (*call).describeScalingActivities,
		"EnterStandby":              (*call).enterStandby,
		"ExitStandby":               (*call).exitStandby,
		"SetInstancesProtection":    (*call).setInstancesProtection,
		"AttachInstances":           (*call).attachInstances,
		"CreateLifecycleHook":       (*call).createLifecycleHook,
		"CompleteLifecycleAction":   (*call).completeLifecycleAction,
		"DescribeLifecycleActions":  (*call).describeLifecycleActions,
		"TagResources":              (*call).essTagResources,
		"ListTagResources":          (*call).essListTagResources,
		"UntagResources":            (*call).essUntagResources,
	})
}

// checkRPCAuth accepts only the configured AccessKeyId and, when the request
// carries an HMAC-SHA1 signature, checks it the way the SDK computes it:
// METHOD&%2F&percent-encoded(sorted query and form parameters).
func (s *Server) checkRPCAuth(r *http.Request) *apiError {
	p := r.Form
	if p.Get("AccessKeyId") == "" {
		return errMissing("AccessKeyId")
	}
	if p.Get("AccessKeyId") != s.cfg.AccessKeyID {
		return errf(404, "InvalidAccessKeyId.NotFound", "Specified access key is not found.")
	}
	if p.Get("SignatureMethod") != "HMAC-SHA1" {
		return errf(400, "InvalidSignatureMethod", "Specified signature method is not valid.")
	}
	canon := url.Values{}
	for k, v := range p {
		if k != "Signature" && len(v) > 0 {
			canon.Set(k, v[0])
		}
	}
	enc := canon.Encode()
	enc = strings.NewReplacer("+", "%20", "*", "%2A", "%7E", "~").Replace(enc)
	toSign := r.Method + "&%2F&" + url.QueryEscape(enc)
	mac := hmac.New(sha1.New, []byte(s.cfg.AccessKeySecret+"&"))
	mac.Write([]byte(toSign))
	want := base64.StdEncoding.EncodeToString(mac.Sum(nil))
	if !hmac.Equal([]byte(want), []byte(p.Get("Signature"))) {
		return errf(400, "SignatureDoesNotMatch", "Specified signature is not matched with our calculation.")
	}
	return nil
}

func (s *Server) takeThrottle(action string) bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.throttle[action] > 0 {
		s.throttle[action]--
		return true
	}
	return false
}

// indexed collects repeated struct parameters Prefix.N.Field in order of N.
func indexed(p url.Values, prefix string) []map[string]string {
	byN := map[int]map[string]string{}
	for k, v := range p {
		rest, ok := strings.CutPrefix(k, prefix+".")
		if !ok {
			continue
		}
		ns, field, ok := strings.Cut(rest, ".")
		n, err := strconv.Atoi(ns)
		if !ok || err != nil {
			continue
		}
		if byN[n] == nil {
			byN[n] = map[string]string{}
		}
		byN[n][field] = v[0]
	}
	return inOrder(byN)
}

// list collects repeated scalar parameters Prefix.N in order of N.
func list(p url.Values, prefix string) []string {
	byN := map[int]string{}
	for k, v := range p {
		rest, ok := strings.CutPrefix(k, prefix+".")
		if !ok {
			continue
		}
		if n, err := strconv.Atoi(rest); err == nil {
			byN[n] = v[0]
		}
	}
	return inOrder(byN)
}

func inOrder[T any](byN map[int]T) []T {
	ns := make([]int, 0, len(byN))
	for n := range byN {
		ns = append(ns, n)
	}
	sort.Ints(ns)
	out := make([]T, 0, len(ns))
	for _, n := range ns {
		out = append(out, byN[n])
	}
	return out
}

// tag is a resource tag; tags keep their order and keys are unique.
type tag struct{ Key, Value string }

func tagParams(p url.Values) ([]tag, *apiError) {
	var out []tag
	for _, m := range indexed(p, "Tag") {
		if m["Key"] == "" {
			return nil, errInvalid("Tag.N.Key")
		}
		out = setTag(out, tag{m["Key"], m["Value"]})
	}
	return out, nil
}

func setTag(tags []tag, t tag) []tag {
	for i := range tags {
		if tags[i].Key == t.Key {
			tags[i].Value = t.Value
			return tags
		}
	}
	return append(tags, t)
}

func hasTags(have, want []tag) bool {
	for _, w := range want {
		found := false
		for _, h := range have {
			if h.Key == w.Key && (w.Value == "" || h.Value == w.Value) {
				found = true
			}
		}
		if !found {
			return false
		}
	}
	return true
}

func (c *call) intParam(name string, def int) (int, *apiError) {
	v := c.p.Get(name)
	if v == "" {
		return def, nil
	}
	n, err := strconv.Atoi(v)
	if err != nil {
		return 0, errInvalid(name)
	}
	return n, nil
}

func (c *call) boolParam(name string, def bool) (bool, *apiError) {
	switch strings.ToLower(c.p.Get(name)) {
	case "":
		return def, nil
	case "true":
		return true, nil
	case "false":
		return false, nil
	}
	return false, errInvalid(name)
}

// page applies PageNumber/PageSize (defaults 1 and 10, at most maxSize) to n
// items and returns the slice bounds and the echoed values.
func (c *call) page(n, maxSize int) (lo, hi, number, size int, e *apiError) {
	if number, e = c.intParam("PageNumber", 1); e != nil {
		return
	}
	if size, e = c.intParam("PageSize", 10); e != nil {
		return
	}
	if number < 1 {
		return 0, 0, 0, 0, errInvalid("PageNumber")
	}
	if size < 1 || size > maxSize {
		return 0, 0, 0, 0, errInvalid("PageSize")
	}
	lo = min((number-1)*size, n)
	hi = min(lo+size, n)
	return
}

func ecsTime(t time.Time) string { return t.UTC().Format("2006-01-02T15:04:05Z") }

// essTime is ESS's minute-precision time format.
func essTime(t time.Time) string { return t.UTC().Format("2006-01-02T15:04Z") }

// tokenCall is a successful call made with a ClientToken. ECS documents
// ("How to ensure idempotence", alibabacloud.com/help/en/doc-detail/25693):
// the same token with the same parameters gets the first call's result
// without acting again; the same token with other parameters is refused
// with IdempotentParameterMismatch. How long a token is remembered is not
// documented: here, for the server's life. ESS's ClientToken parameters
// (ScaleWithAdjustment, RemoveInstances, …) say "ensures idempotence"
// without naming a mismatch code: the ECS one is used. A failed call does
// not use its token up (not documented either; a retry must be able to
// succeed).
type tokenCall struct {
	params string
	resp   obj
}

func (s *Server) earlierCall(key string) (tokenCall, bool) {
	s.mu.Lock()
	defer s.mu.Unlock()
	c, ok := s.tokens[key]
	return c, ok
}

func (s *Server) rememberCall(key string, c tokenCall) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.tokens[key] = c
}

func (s *Server) takeLost(action string) bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.lose[action] > 0 {
		s.lose[action]--
		return true
	}
	return false
}

// requestParams is the request's own parameters in a canonical form: the
// signature's and the token's parameters, which differ on every retry,
// left out.
func requestParams(form url.Values) string {
	v := url.Values{}
	for k, vs := range form {
		switch k {
		case "Signature", "SignatureNonce", "Timestamp", "ClientToken", "AccessKeyId", "SignatureMethod",
			"SignatureVersion", "SignatureType", "Format", "Version", "SecurityToken":
			continue
		}
		v[k] = vs
	}
	return v.Encode()
}
