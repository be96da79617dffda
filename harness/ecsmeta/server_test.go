package ecsmeta

import (
	"encoding/json"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"
	"time"
)

// do sends one request straight to the handler.
func do(t *testing.T, s *Server, method, path string, hdr map[string]string) (int, string) {
	t.Helper()
	req := httptest.NewRequest(method, path, nil)
	for k, v := range hdr {
		req.Header.Set(k, v)
	}
	rec := httptest.NewRecorder()
	s.ServeHTTP(rec, req)
	return rec.Code, rec.Body.String()
}

func token(t *testing.T, s *Server, ttl string) string {
	t.Helper()
	code, body := do(t, s, http.MethodPut, TokenPath, map[string]string{TokenTTLHeader: ttl})
	if code != http.StatusOK || body == "" {
		t.Fatalf("PUT %s: %d %q", TokenPath, code, body)
	}
	return body
}

func TestMetaDataKeys(t *testing.T) {
	inst := DefaultInstance()
	s := New(inst, Options{})
	mac := "/latest/meta-data/network/interfaces/macs/" + inst.MAC + "/"
	for path, want := range map[string]string{
		"/latest/meta-data/instance-id":            inst.InstanceID,
		"/latest/meta-data/region-id":              "cn-hangzhou",
		"/latest/meta-data/zone-id":                "cn-hangzhou-h",
		"/latest/meta-data/hostname":               inst.Hostname,
		"/latest/meta-data/instance/instance-type": "ecs.g7.large",
		"/latest/meta-data/instance/instance-name": inst.InstanceName,
		"/latest/meta-data/image-id":               inst.ImageID,
		"/latest/meta-data/mac":                    "52:54:00:12:34:56",
		"/latest/meta-data/private-ipv4":           "10.0.2.15",
		"/latest/meta-data/vpc-id":                 inst.VPCID,
		"/latest/meta-data/vpc-cidr-block":         inst.VPCCIDR,
		"/latest/meta-data/vswitch-id":             inst.VSwitchID,
		"/latest/meta-data/vswitch-cidr-block":     inst.VSwitchCIDR,
		"/latest/meta-data/dns-conf/nameservers":   "10.0.2.3",
		"/latest/meta-data/ntp-conf/ntp-servers":   "ntp.cloud.aliyuncs.com",
		mac + "network-interface-id":               inst.NetworkInterfaceID,
		mac + "primary-ip-address":                 "10.0.2.15",
		mac + "netmask":                            "255.255.255.0",
		mac + "gateway":                            "10.0.2.2",
		mac + "vswitch-cidr-block":                 inst.VSwitchCIDR,
		mac + "vpc-cidr-block":                     inst.VPCCIDR,
	} {
		code, body := do(t, s, http.MethodGet, path, nil)
		if code != http.StatusOK || body != want {
			t.Errorf("GET %s = %d %q, want 200 %q", path, code, body, want)
		}
	}
	for _, path := range []string{
		"/latest/meta-data/nope",
		"/latest/meta-data/instance-id/",
		"/latest/meta-data/instance/nope",
		"/latest/meta-dataX",
		"/latest/user-data", // nil user-data
		"/other",
	} {
		if code, _ := do(t, s, http.MethodGet, path, nil); code != http.StatusNotFound {
			t.Errorf("GET %s = %d, want 404", path, code)
		}
	}
}

func TestPrivateIPv4sJSON(t *testing.T) {
	inst := DefaultInstance()
	s := New(inst, Options{})
	code, body := do(t, s, http.MethodGet, "/latest/meta-data/network/interfaces/macs/"+inst.MAC+"/private-ipv4s", nil)
	var ips []string
	if err := json.Unmarshal([]byte(body), &ips); code != http.StatusOK || err != nil {
		t.Fatalf("private-ipv4s = %d %q (%v), want a JSON array", code, body, err)
	}
	if len(ips) != 1 || ips[0] != "10.0.2.15" {
		t.Errorf("private-ipv4s = %v, want [10.0.2.15]", ips)
	}
}

func TestDirectoryListings(t *testing.T) {
	inst := DefaultInstance()
	inst.Tags = map[string]string{"team": "infra"}
	inst.UserData = []byte("x")
	s := New(inst, Options{})
	for path, want := range map[string]string{
		"/latest/meta-data/": "dns-conf/\nhostname\nimage-id\ninstance-id\ninstance/\nmac\nnetwork/\nntp-conf/\n" +
			"private-ipv4\nregion-id\ntags/\nvpc-cidr-block\nvpc-id\nvswitch-cidr-block\nvswitch-id\nzone-id",
		"/latest/meta-data":                          "", // same as above, checked below
		"/latest/meta-data/instance/":                "instance-name\ninstance-type",
		"/latest/meta-data/network/interfaces/macs/": "52:54:00:12:34:56/",
		"/latest/meta-data/network/interfaces/macs/52:54:00:12:34:56/": "gateway\nnetmask\nnetwork-interface-id\n" +
			"primary-ip-address\nprivate-ipv4s\nvpc-cidr-block\nvswitch-cidr-block",
		"/latest/meta-data/tags/instance/": "team",
		"/latest/":                         "meta-data/\nuser-data",
	} {
		code, body := do(t, s, http.MethodGet, path, nil)
		if want == "" {
			_, want = do(t, s, http.MethodGet, path+"/", nil)
		}
		if code != http.StatusOK || body != want {
			t.Errorf("GET %s = %d\n%s\nwant 200\n%s", path, code, body, want)
		}
	}
}

func TestTags(t *testing.T) {
	inst := DefaultInstance()
	s := New(inst, Options{})
	for _, path := range []string{"/latest/meta-data/tags/", "/latest/meta-data/tags/instance/team"} {
		if code, _ := do(t, s, http.MethodGet, path, nil); code != http.StatusNotFound {
			t.Errorf("tags disabled: GET %s = %d, want 404", path, code)
		}
	}
	inst.Tags = map[string]string{"team": "infra"}
	s.SetInstance(inst)
	if code, body := do(t, s, http.MethodGet, "/latest/meta-data/tags/instance/team", nil); code != 200 || body != "infra" {
		t.Errorf("tags enabled: GET team = %d %q, want 200 infra", code, body)
	}
	if code, _ := do(t, s, http.MethodGet, "/latest/meta-data/tags/instance/other", nil); code != http.StatusNotFound {
		t.Errorf("tags enabled: GET missing tag = %d, want 404", code)
	}
}

func TestUserData(t *testing.T) {
	inst := DefaultInstance()
	inst.UserData = []byte{0x1f, 0x8b, 0, 1, 2}
	s := New(inst, Options{})
	if code, body := do(t, s, http.MethodGet, "/latest/user-data", nil); code != 200 || body != string(inst.UserData) {
		t.Errorf("user-data = %d %q, want the raw bytes", code, body)
	}
}

func TestHardenedMode(t *testing.T) {
	s := New(DefaultInstance(), Options{TokenEndpoint: true, TokenRequired: true})
	const key = "/latest/meta-data/instance-id"

	if code, _ := do(t, s, http.MethodGet, key, nil); code != http.StatusForbidden {
		t.Errorf("tokenless GET with tokens required = %d, want 403", code)
	}
	if code, _ := do(t, s, http.MethodGet, key, map[string]string{TokenHeader: "bogus"}); code != http.StatusUnauthorized {
		t.Errorf("GET with unknown token = %d, want 401", code)
	}
	tok := token(t, s, "21600")
	if code, _ := do(t, s, http.MethodGet, key, map[string]string{TokenHeader: tok}); code != http.StatusOK {
		t.Errorf("GET with token = %d, want 200", code)
	}
	if code, _ := do(t, s, http.MethodGet, TokenPath, nil); code != http.StatusMethodNotAllowed {
		t.Errorf("GET %s = %d, want 405", TokenPath, code)
	}

	reqs := s.Requests()
	if len(reqs) != 5 || reqs[0].Status != 403 || reqs[0].Token || reqs[1].Status != 401 || !reqs[1].Token ||
		reqs[2].Method != http.MethodPut || reqs[3].Status != 200 || !reqs[3].Token {
		t.Errorf("request log = %+v", reqs)
	}
	if st := s.Stats(); st.TokensIssued != 1 || st.ByStatus[403] != 1 || st.ByStatus[401] != 1 {
		t.Errorf("stats = %+v", st)
	}
}

func TestTokenOptional(t *testing.T) {
	s := New(DefaultInstance(), Options{TokenEndpoint: true})
	if code, _ := do(t, s, http.MethodGet, "/latest/meta-data/instance-id", nil); code != http.StatusOK {
		t.Errorf("tokenless GET with tokens optional = %d, want 200", code)
	}
}

func TestTokenTTLRange(t *testing.T) {
	s := New(DefaultInstance(), Options{TokenEndpoint: true})
	for _, ttl := range []string{"", "0", "-1", "21601", "abc", "1.5"} {
		code, _ := do(t, s, http.MethodPut, TokenPath, map[string]string{TokenTTLHeader: ttl})
		if code != http.StatusBadRequest {
			t.Errorf("PUT token ttl %q = %d, want 400", ttl, code)
		}
	}
	for _, ttl := range []string{"1", "21600"} {
		token(t, s, ttl)
	}
}

func TestTokenThroughProxyForbidden(t *testing.T) {
	s := New(DefaultInstance(), Options{TokenEndpoint: true})
	code, _ := do(t, s, http.MethodPut, TokenPath, map[string]string{TokenTTLHeader: "60", "X-Forwarded-For": "10.0.0.9"})
	if code != http.StatusForbidden {
		t.Errorf("PUT token with X-Forwarded-For = %d, want 403", code)
	}
}

func TestOldServiceWithoutTokenEndpoint(t *testing.T) {
	s := New(DefaultInstance(), Options{TokenEndpoint: false, TokenRequired: true})
	if code, _ := do(t, s, http.MethodPut, TokenPath, map[string]string{TokenTTLHeader: "60"}); code != http.StatusNotFound {
		t.Errorf("PUT token on old service = %d, want 404", code)
	}
	if code, _ := do(t, s, http.MethodGet, "/latest/meta-data/instance-id", map[string]string{TokenHeader: "x"}); code != 200 {
		t.Errorf("GET on old service = %d, want 200 (tokens ignored)", code)
	}
}

func TestTokenExpiry(t *testing.T) {
	now := time.Date(2025, 1, 1, 0, 0, 0, 0, time.UTC)
	var mu sync.Mutex
	clock := func() time.Time { mu.Lock(); defer mu.Unlock(); return now }
	s := New(DefaultInstance(), Options{TokenEndpoint: true, TokenRequired: true, Now: clock})
	s.SetFaults(Faults{TokenTTLOverride: time.Minute})
	tok := token(t, s, "3600")
	hdr := map[string]string{TokenHeader: tok}
	if code, _ := do(t, s, http.MethodGet, "/latest/meta-data/zone-id", hdr); code != 200 {
		t.Fatalf("GET with fresh token = %d", code)
	}
	mu.Lock()
	now = now.Add(time.Minute)
	mu.Unlock()
	if code, _ := do(t, s, http.MethodGet, "/latest/meta-data/zone-id", hdr); code != http.StatusUnauthorized {
		t.Errorf("GET with token past the overridden TTL = %d, want 401", code)
	}
	// Issuing a new token must not forget the expired one: presenting it
	// again still counts as expired, while a token never issued does not.
	fresh := token(t, s, "3600")
	if code, _ := do(t, s, http.MethodGet, "/latest/meta-data/zone-id", hdr); code != http.StatusUnauthorized {
		t.Errorf("GET with the expired token after a new one was issued = %d, want 401", code)
	}
	if code, _ := do(t, s, http.MethodGet, "/latest/meta-data/zone-id", map[string]string{TokenHeader: "never-issued"}); code != http.StatusUnauthorized {
		t.Errorf("GET with an unknown token = %d, want 401", code)
	}
	if code, _ := do(t, s, http.MethodGet, "/latest/meta-data/zone-id", map[string]string{TokenHeader: fresh}); code != 200 {
		t.Errorf("GET with the renewed token = %d, want 200", code)
	}
	st := s.Stats()
	if st.TokensExpired != 2 || st.TokensIssued != 2 || st.ByStatus[http.StatusUnauthorized] != 3 {
		t.Errorf("stats %+v: want 2 expired-token refusals, 2 tokens issued, 3 401s", st)
	}
}

// TestTokenTTLCount: only the first TokenTTLCount tokens are shortened.
func TestTokenTTLCount(t *testing.T) {
	now := time.Date(2025, 1, 1, 0, 0, 0, 0, time.UTC)
	var mu sync.Mutex
	clock := func() time.Time { mu.Lock(); defer mu.Unlock(); return now }
	s := New(DefaultInstance(), Options{TokenEndpoint: true, TokenRequired: true, Now: clock})
	s.SetFaults(Faults{TokenTTLOverride: time.Second, TokenTTLCount: 1})
	short, long := token(t, s, "3600"), token(t, s, "3600")
	mu.Lock()
	now = now.Add(2 * time.Second)
	mu.Unlock()
	if code, _ := do(t, s, http.MethodGet, "/latest/meta-data/zone-id", map[string]string{TokenHeader: short}); code != http.StatusUnauthorized {
		t.Errorf("GET with the shortened token after 2s = %d, want 401", code)
	}
	if code, _ := do(t, s, http.MethodGet, "/latest/meta-data/zone-id", map[string]string{TokenHeader: long}); code != 200 {
		t.Errorf("GET with the second token after 2s = %d, want 200 (only one token is shortened)", code)
	}
	if f := s.Faults(); f.TokenTTLCount != 0 || f.TokenTTLOverride != 0 {
		t.Errorf("faults after the counted run: %+v", f)
	}
}

// TestStatsCountFaults: the counters the smoke report states are what was
// injected, request by request.
func TestStatsCountFaults(t *testing.T) {
	s := New(DefaultInstance(), Options{})
	s.SetFaults(Faults{FailNext: 3, Delay: time.Millisecond, DelayCount: 2, SlowPaths: []string{"/latest/meta-data/"}})
	for range 6 {
		do(t, s, http.MethodGet, "/latest/meta-data/zone-id", nil)
	}
	do(t, s, http.MethodGet, "/latest/user-data", nil)
	st := s.Stats()
	if st.Requests != 7 || st.Injected != 3 || st.Delayed != 2 || st.TokensExpired != 0 {
		t.Errorf("stats %+v: want 7 requests, 3 injected, 2 delayed, 0 expired", st)
	}
	var injected, delayed int
	for _, r := range s.Requests() {
		if r.Injected {
			injected++
		}
		if r.Delayed {
			delayed++
		}
	}
	if injected != st.Injected || delayed != st.Delayed {
		t.Errorf("request log has %d injected, %d delayed; stats say %d, %d", injected, delayed, st.Injected, st.Delayed)
	}
}

func TestFaultsDeterministic(t *testing.T) {
	run := func() []int {
		s := New(DefaultInstance(), Options{})
		s.SetFaults(Faults{ErrorRate: 0.3, Seed: 42})
		var codes []int
		for range 200 {
			code, _ := do(t, s, http.MethodGet, "/latest/meta-data/zone-id", nil)
			codes = append(codes, code)
		}
		return codes
	}
	a, b := run(), run()
	failed := map[int]int{}
	for i := range a {
		if a[i] != b[i] {
			t.Fatalf("request %d: %d then %d with the same seed", i, a[i], b[i])
		}
		if a[i] != 200 {
			failed[a[i]]++
		}
	}
	n := failed[500] + failed[502] + failed[503] + failed[429]
	if n < 30 || n > 90 || len(failed) != 4 {
		t.Errorf("ErrorRate 0.3 over 200 requests failed %v, want about 60 spread over 500/502/503/429", failed)
	}
}

func TestFailNextAndPaths(t *testing.T) {
	s := New(DefaultInstance(), Options{})
	s.SetFaults(Faults{FailNext: 2, FailStatus: 429, FailPaths: []string{"/latest/user-data"}})
	if code, _ := do(t, s, http.MethodGet, "/latest/meta-data/zone-id", nil); code != 200 {
		t.Errorf("path outside FailPaths = %d, want 200", code)
	}
	for i := range 2 {
		if code, _ := do(t, s, http.MethodGet, "/latest/user-data", nil); code != 429 {
			t.Errorf("failure %d = %d, want 429", i, code)
		}
	}
	if code, _ := do(t, s, http.MethodGet, "/latest/user-data", nil); code != 404 {
		t.Errorf("after the burst = %d, want 404 (no user-data)", code)
	}
	if f := s.Faults(); f.FailNext != 0 {
		t.Errorf("FailNext after the burst = %d, want 0", f.FailNext)
	}
	if st := s.Stats(); st.Injected != 2 {
		t.Errorf("Injected = %d, want 2", st.Injected)
	}
}

// TestServeDelayAbandoned runs the real listener: a client that gives up during a
// delay is logged as StatusClientClosed, and Close ends Serve.
func TestServeDelayAbandoned(t *testing.T) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	s := New(DefaultInstance(), Options{})
	done := make(chan error, 1)
	go func() { done <- s.Serve(ln) }()
	base := "http://" + ln.Addr().String()

	s.SetFaults(Faults{Delay: time.Hour, DelayCount: 1, SlowPaths: []string{"/latest/meta-data/zone-id"}})
	client := &http.Client{Timeout: 50 * time.Millisecond}
	if _, err := client.Get(base + "/latest/meta-data/zone-id"); err == nil {
		t.Fatal("delayed request answered, want a client timeout")
	}
	client.Timeout = 0
	resp, err := client.Get(base + "/latest/meta-data/zone-id")
	if err != nil {
		t.Fatal(err)
	}
	body, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	if string(body) != "cn-hangzhou-h" {
		t.Errorf("after the delayed run: %q", body)
	}
	if err := s.Close(); err != nil {
		t.Error(err)
	}
	if err := <-done; err != nil {
		t.Errorf("Serve after Close = %v, want nil", err)
	}
	// The abandoned handler records itself once it notices the closed
	// connection, which may be after Close returns: wait for it, bounded.
	abandoned := func() int {
		n := 0
		for _, r := range s.Requests() {
			if r.Status == StatusClientClosed && r.Delayed {
				n++
			}
		}
		return n
	}
	for i := 0; abandoned() == 0 && i < 1000; i++ {
		time.Sleep(10 * time.Millisecond)
	}
	if abandoned() != 1 || s.Stats().Delayed != 1 {
		t.Errorf("log = %+v, want one abandoned delayed request", s.Requests())
	}
}

func TestMethodNotAllowed(t *testing.T) {
	s := New(DefaultInstance(), Options{})
	if code, _ := do(t, s, http.MethodPost, "/latest/meta-data/zone-id", nil); code != http.StatusMethodNotAllowed {
		t.Errorf("POST = %d, want 405", code)
	}
	if code, body := do(t, s, http.MethodGet, "/latest/meta-data/dns-conf/nameservers", nil); code != 200 || strings.Contains(body, "/") {
		t.Errorf("nameservers = %d %q", code, body)
	}
}

func TestRAMRoleCredentials(t *testing.T) {
	now := time.Date(2026, 12, 2, 8, 0, 0, 0, time.UTC)
	inst := DefaultInstance()
	inst.RAMRole = "drover-node"
	s := New(inst, Options{TokenEndpoint: true, TokenRequired: true, STSLifetime: time.Hour, Now: func() time.Time { return now }})
	tok := token(t, s, "21600")
	hdr := map[string]string{TokenHeader: tok}

	if code, body := do(t, s, http.MethodGet, "/latest/meta-data/ram/security-credentials/", hdr); code != 200 || body != "drover-node" {
		t.Fatalf("role listing: %d %q", code, body)
	}
	if code, body := do(t, s, http.MethodGet, "/latest/meta-data/", hdr); code != 200 || !strings.Contains(body, "ram/") {
		t.Errorf("meta-data listing lacks ram/: %d %q", code, body)
	}
	get := func() map[string]string {
		t.Helper()
		code, body := do(t, s, http.MethodGet, "/latest/meta-data/ram/security-credentials/drover-node", hdr)
		var m map[string]string
		if code != 200 || json.Unmarshal([]byte(body), &m) != nil {
			t.Fatalf("role credentials: %d %q", code, body)
		}
		return m
	}
	first := get()
	for _, k := range []string{"AccessKeyId", "AccessKeySecret", "SecurityToken"} {
		if first[k] == "" {
			t.Errorf("credentials lack %s: %v", k, first)
		}
	}
	if first["Code"] != "Success" || first["Expiration"] != "2026-12-02T09:00:00Z" || first["LastUpdated"] != "2026-12-02T08:00:00Z" {
		t.Errorf("credentials %v", first)
	}
	// The same until half their life is gone, then new ones; the old ones
	// are still known to a verifier.
	now = now.Add(29 * time.Minute)
	if again := get(); again["AccessKeyId"] != first["AccessKeyId"] {
		t.Errorf("rotated after 29 of 60 minutes")
	}
	now = now.Add(time.Minute)
	second := get()
	if second["AccessKeyId"] == first["AccessKeyId"] || second["SecurityToken"] == first["SecurityToken"] || second["Expiration"] != "2026-12-02T09:30:00Z" {
		t.Errorf("not rotated halfway: %v then %v", first, second)
	}
	for _, m := range []map[string]string{first, second} {
		c, ok := s.RoleCredentials(m["AccessKeyId"])
		if !ok || c.AccessKeySecret != m["AccessKeySecret"] || c.SecurityToken != m["SecurityToken"] || c.Role != "drover-node" {
			t.Errorf("RoleCredentials(%s) = %+v, %v", m["AccessKeyId"], c, ok)
		}
	}
	if n := len(s.IssuedCredentials()); n != 2 || s.Stats().STSIssued != 2 {
		t.Errorf("%d issued, stats %d", n, s.Stats().STSIssued)
	}
	// Tokens are required for the role's key as for any other.
	if code, _ := do(t, s, http.MethodGet, "/latest/meta-data/ram/security-credentials/drover-node", nil); code != http.StatusForbidden {
		t.Errorf("tokenless GET of the credentials: %d", code)
	}

	s.DetachRAMRole()
	for _, p := range []string{"/latest/meta-data/ram/security-credentials/", "/latest/meta-data/ram/security-credentials/drover-node"} {
		if code, _ := do(t, s, http.MethodGet, p, hdr); code != http.StatusNotFound {
			t.Errorf("GET %s after the role was detached: %d, want 404", p, code)
		}
	}
	// Without a role from the start, nothing under ram/.
	if code, _ := do(t, New(DefaultInstance(), Options{}), http.MethodGet, "/latest/meta-data/ram/security-credentials/", nil); code != http.StatusNotFound {
		t.Errorf("no role: %d", code)
	}
}
