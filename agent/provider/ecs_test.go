package provider

import (
	"bytes"
	"context"
	"errors"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/drover-os/drover/harness/ecsmeta"
)

// fakeClock is shared by the client and the emulator; Sleep advances it, so
// retries and token expiry take no real time.
type fakeClock struct {
	mu sync.Mutex
	t  time.Time
}

func newFakeClock() *fakeClock {
	return &fakeClock{t: time.Date(2025, 6, 1, 8, 0, 0, 0, time.UTC)}
}

func (c *fakeClock) Now() time.Time {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.t
}

func (c *fakeClock) Advance(d time.Duration) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.t = c.t.Add(d)
}

func (c *fakeClock) Sleep(ctx context.Context, d time.Duration) error {
	if err := ctx.Err(); err != nil {
		return err
	}
	c.Advance(d)
	return nil
}

// logLines collects the client's log.
type logLines struct {
	mu    sync.Mutex
	lines []string
}

func (l *logLines) add(s string) {
	l.mu.Lock()
	defer l.mu.Unlock()
	l.lines = append(l.lines, s)
}

func (l *logLines) count(substr string) int {
	l.mu.Lock()
	defer l.mu.Unlock()
	n := 0
	for _, s := range l.lines {
		if strings.Contains(s, substr) {
			n++
		}
	}
	return n
}

func (l *logLines) String() string {
	l.mu.Lock()
	defer l.mu.Unlock()
	return strings.Join(l.lines, "\n")
}

// fixture is an emulator on httptest plus a client with a fake clock.
type fixture struct {
	srv    *ecsmeta.Server
	clock  *fakeClock
	log    *logLines
	client *ECSClient
	base   string
}

func newFixture(t *testing.T, inst ecsmeta.Instance, opts ecsmeta.Options) *fixture {
	t.Helper()
	f := &fixture{clock: newFakeClock(), log: &logLines{}}
	opts.Now = f.clock.Now
	f.srv = ecsmeta.New(inst, opts)
	hs := httptest.NewServer(f.srv)
	t.Cleanup(hs.Close)
	f.base = hs.URL
	f.client = &ECSClient{
		BaseURL: hs.URL,
		Log:     f.log.add,
		Now:     f.clock.Now,
		Sleep:   f.clock.Sleep,
		Rand:    func() float64 { return 0.5 },
	}
	t.Cleanup(func() {
		if t.Failed() {
			t.Logf("client log:\n%s", f.log)
		}
	})
	return f
}

// trace renders the emulator's request log as "METHOD status" lines.
func (f *fixture) trace() string {
	var b strings.Builder
	for _, r := range f.srv.Requests() {
		tok := ""
		if r.Token {
			tok = " token"
		}
		b.WriteString(r.Method + " " + r.Path + " " + http.StatusText(r.Status) + tok + "\n")
	}
	return b.String()
}

func hardened() ecsmeta.Options { return ecsmeta.Options{TokenEndpoint: true, TokenRequired: true} }

func wantFacts(inst ecsmeta.Instance) Facts {
	return Facts{InstanceID: inst.InstanceID, RegionID: inst.RegionID, ZoneID: inst.ZoneID,
		InstanceType: inst.InstanceType, Hostname: inst.Hostname, PrivateIPv4: inst.PrivateIPv4, MAC: inst.MAC,
		NTPServers: strings.Join(inst.NTPServers, " ")}
}

func TestECSTokenRequired(t *testing.T) {
	inst := ecsmeta.DefaultInstance()
	inst.UserData = []byte(`{"ignition":{"version":"3.4.0"}}`)
	f := newFixture(t, inst, hardened())
	ctx := context.Background()

	// The emulator refuses a tokenless GET when tokens are required.
	resp, err := http.Get(f.base + "/latest/meta-data/instance-id")
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if reqs := f.srv.Requests(); resp.StatusCode != 403 || len(reqs) != 1 || reqs[0].Status != 403 || reqs[0].Token {
		t.Fatalf("tokenless GET: %d, log %+v; want 403 without token", resp.StatusCode, reqs)
	}
	f.srv.ResetLog()

	data, present, err := f.client.UserData(ctx)
	if err != nil || !present || !bytes.Equal(data, inst.UserData) {
		t.Fatalf("UserData = %q, %v, %v", data, present, err)
	}
	facts, err := f.client.Facts(ctx)
	if err != nil || facts != wantFacts(inst) {
		t.Fatalf("Facts = %+v, %v; want %+v", facts, err, wantFacts(inst))
	}
	if facts.ProviderID() != "cn-hangzhou."+inst.InstanceID {
		t.Errorf("ProviderID = %q", facts.ProviderID())
	}
	before := len(f.srv.Requests())
	if again, err := f.client.Facts(ctx); err != nil || again != facts {
		t.Errorf("second Facts = %+v, %v", again, err)
	}
	if v, err := f.client.Get(ctx, "zone-id"); err != nil || v != inst.ZoneID {
		t.Errorf("Get(zone-id) = %q, %v", v, err)
	}
	if after := len(f.srv.Requests()); after != before {
		t.Errorf("cached facts caused %d more requests", after-before)
	}

	st := f.srv.Stats()
	if st.TokensIssued != 1 || st.ByStatus[200] != st.Requests || st.Requests != 1+1+len(factKeys)+1 { // + ntp-conf/ntp-servers
		t.Errorf("stats = %+v, want one token and every request 200\n%s", st, f.trace())
	}
	for _, r := range f.srv.Requests() {
		if r.Method == http.MethodGet && !r.Token {
			t.Errorf("GET %s sent without a token", r.Path)
		}
	}
	if n := f.log.count("attempt 1: 200 OK"); n != st.Requests {
		t.Errorf("logged %d successful attempts, want %d", n, st.Requests)
	}
}

func TestECSTokenExpiresEarly(t *testing.T) {
	f := newFixture(t, ecsmeta.DefaultInstance(), hardened())
	f.srv.SetFaults(ecsmeta.Faults{TokenTTLOverride: time.Minute}) // the client asks for 6h
	ctx := context.Background()

	if _, err := f.client.Get(ctx, "instance-id"); err != nil {
		t.Fatal(err)
	}
	f.clock.Advance(2 * time.Minute)
	if v, err := f.client.Get(ctx, "region-id"); err != nil || v != "cn-hangzhou" {
		t.Fatalf("Get after the token expired = %q, %v", v, err)
	}
	want := "PUT /latest/api/token OK\n" +
		"GET /latest/meta-data/instance-id OK token\n" +
		"GET /latest/meta-data/region-id Unauthorized token\n" +
		"PUT /latest/api/token OK\n" +
		"GET /latest/meta-data/region-id OK token\n"
	if got := f.trace(); got != want {
		t.Errorf("requests:\n%s\nwant:\n%s", got, want)
	}
	if f.log.count("401 Unauthorized; requesting a new token") != 1 {
		t.Errorf("the 401 and the renewal are not logged")
	}
}

func TestECSTokenRenewedBeforeExpiry(t *testing.T) {
	f := newFixture(t, ecsmeta.DefaultInstance(), hardened())
	f.client.TokenTTL = 10 * time.Minute // renewed when a minute is left
	ctx := context.Background()
	if _, err := f.client.Get(ctx, "instance-id"); err != nil {
		t.Fatal(err)
	}
	f.clock.Advance(8*time.Minute + 59*time.Second)
	if _, err := f.client.Get(ctx, "zone-id"); err != nil {
		t.Fatal(err)
	}
	f.clock.Advance(2 * time.Second)
	if _, err := f.client.Get(ctx, "region-id"); err != nil {
		t.Fatal(err)
	}
	want := "PUT /latest/api/token OK\n" +
		"GET /latest/meta-data/instance-id OK token\n" +
		"GET /latest/meta-data/zone-id OK token\n" +
		"PUT /latest/api/token OK\n" +
		"GET /latest/meta-data/region-id OK token\n"
	if got := f.trace(); got != want {
		t.Errorf("requests:\n%s\nwant:\n%s", got, want)
	}
}

func TestECSOldServiceFallsBackToTokenless(t *testing.T) {
	inst := ecsmeta.DefaultInstance()
	inst.UserData = []byte("data")
	f := newFixture(t, inst, ecsmeta.Options{TokenEndpoint: false})
	ctx := context.Background()
	if _, _, err := f.client.UserData(ctx); err != nil {
		t.Fatal(err)
	}
	if _, err := f.client.Facts(ctx); err != nil {
		t.Fatal(err)
	}
	if n := f.log.count("no token endpoint, continuing without a token"); n != 1 {
		t.Errorf("fallback logged %d times, want once", n)
	}
	puts := 0
	for _, r := range f.srv.Requests() {
		if r.Method == http.MethodPut {
			puts++
			if r.Status != http.StatusNotFound {
				t.Errorf("PUT answered %d, want 404", r.Status)
			}
		} else if r.Token {
			t.Errorf("GET %s carried a token after the fallback", r.Path)
		}
	}
	if puts != 1 {
		t.Errorf("%d token requests, want 1", puts)
	}
}

// proxyTransport adds what an HTTP proxy would.
type proxyTransport struct{}

func (proxyTransport) RoundTrip(r *http.Request) (*http.Response, error) {
	r = r.Clone(r.Context())
	r.Header.Set("X-Forwarded-For", "192.168.1.10")
	return http.DefaultTransport.RoundTrip(r)
}

func TestECSTokenThroughProxyRefused(t *testing.T) {
	f := newFixture(t, ecsmeta.DefaultInstance(), hardened())
	f.client.HTTP = &http.Client{Transport: proxyTransport{}}
	_, err := f.client.Get(context.Background(), "instance-id")
	var se *StatusError
	if !errors.As(err, &se) || se.Code != 403 || se.Path != "/latest/api/token" || !strings.Contains(err.Error(), "proxy") {
		t.Fatalf("Get through a proxy: %v, want a 403 on the token request explaining the proxy", err)
	}
	if reqs := f.srv.Requests(); len(reqs) != 1 || reqs[0].Status != 403 {
		t.Errorf("emulator log = %+v, want one refused PUT (no retries)", reqs)
	}
}

func TestECSUserDataNotFound(t *testing.T) {
	f := newFixture(t, ecsmeta.DefaultInstance(), hardened())
	data, present, err := f.client.UserData(context.Background())
	if data != nil || present || err != nil {
		t.Errorf("UserData = %q, %v, %v; want not present", data, present, err)
	}
}

// TestECSUserDataAsGiven: gzip-compressed user-data is returned as the
// service gives it; ignition.Parse is the one place that decompresses, so
// the agent and drover validate read the same bytes.
func TestECSUserDataAsGiven(t *testing.T) {
	inst := ecsmeta.DefaultInstance()
	config := []byte(`{"ignition":{"version":"3.4.0"},"storage":{}}`)
	inst.UserData = gz(t, config)
	f := newFixture(t, inst, hardened())
	data, present, err := f.client.UserData(context.Background())
	if !bytes.Equal(data, inst.UserData) || !present || err != nil {
		t.Errorf("gzip user-data = %q, %v, %v; want the compressed bytes as given", data, present, err)
	}

	// Compressed twice: still as given (Parse refuses it, on the node as in
	// drover validate).
	inst.UserData = gz(t, gz(t, config))
	f.srv.SetInstance(inst)
	if data, _, err := f.client.UserData(context.Background()); !bytes.Equal(data, inst.UserData) || err != nil {
		t.Errorf("gzip twice = %q, %v; want the bytes as given", data, err)
	}

	// Raw user-data at and beyond the service's 32 KiB.
	inst.UserData = bytes.Repeat([]byte("x"), maxECSUserData)
	f.srv.SetInstance(inst)
	if data, _, err := f.client.UserData(context.Background()); len(data) != maxECSUserData || err != nil {
		t.Errorf("32 KiB user-data: %d bytes, %v", len(data), err)
	}
	inst.UserData = bytes.Repeat([]byte("x"), maxECSUserData+1)
	f.srv.SetInstance(inst)
	if _, _, err := f.client.UserData(context.Background()); err == nil || !strings.Contains(err.Error(), "larger than") {
		t.Errorf("oversized user-data: %v", err)
	}
}

func TestECSKeys(t *testing.T) {
	inst := ecsmeta.DefaultInstance()
	inst.ZoneID = ""
	f := newFixture(t, inst, hardened())
	ctx := context.Background()

	for _, key := range []string{"", "/instance-id", "../user-data", "a/./b", "x?y"} {
		if _, err := f.client.Get(ctx, key); err == nil {
			t.Errorf("Get(%q) accepted", key)
		}
	}
	if n := len(f.srv.Requests()); n != 0 {
		t.Errorf("invalid keys caused %d requests", n)
	}
	if _, err := f.client.Get(ctx, "nope"); !errors.Is(err, ErrNotFound) || !strings.Contains(err.Error(), "/latest/meta-data/nope") {
		t.Errorf("Get(nope) = %v, want ErrNotFound naming the path", err)
	}
	if v, err := f.client.Get(ctx, "network/interfaces/macs/"); err != nil || v != inst.MAC+"/" {
		t.Errorf("listing = %q, %v", v, err)
	}
	facts, err := f.client.Facts(ctx)
	if err != nil || facts.ZoneID != "" || facts.InstanceID != inst.InstanceID {
		t.Errorf("Facts without zone-id = %+v, %v; want the zone empty", facts, err)
	}

	inst.RegionID = ""
	g := newFixture(t, inst, hardened())
	if _, err := g.client.Facts(ctx); !errors.Is(err, ErrNotFound) || !strings.Contains(err.Error(), "region-id") {
		t.Errorf("Facts without region-id = %v, want ErrNotFound naming it", err)
	}
}

func TestECSConcurrentCallersShareOneToken(t *testing.T) {
	f := newFixture(t, ecsmeta.DefaultInstance(), hardened())
	var wg sync.WaitGroup
	keys := []string{"instance-id", "region-id", "zone-id", "hostname", "mac", "private-ipv4", "image-id", "vpc-id"}
	errs := make(chan error, len(keys))
	for _, k := range keys {
		wg.Add(1)
		go func() {
			defer wg.Done()
			_, err := f.client.Get(context.Background(), k)
			errs <- err
		}()
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		if err != nil {
			t.Error(err)
		}
	}
	if n := f.srv.Stats().TokensIssued; n != 1 {
		t.Errorf("%d tokens issued for concurrent callers, want 1", n)
	}
}

// TestECSNTPServers: ntp-conf/ntp-servers is read into the facts; a
// missing key or a service failing on it leaves none without failing
// Facts (the join goes on), within a bound of its own; what is not a host
// name or address never reaches the facts.
func TestECSNTPServers(t *testing.T) {
	ctx := context.Background()
	inst := ecsmeta.DefaultInstance()
	inst.NTPServers = []string{"ntp.cloud.aliyuncs.com", "100.100.3.1", "NTP2.example.com"}
	f := newFixture(t, inst, hardened())
	facts, err := f.client.Facts(ctx)
	if err != nil || facts.NTPServers != "ntp.cloud.aliyuncs.com 100.100.3.1 ntp2.example.com" {
		t.Errorf("NTPServers = %q, %v", facts.NTPServers, err)
	}

	inst.NTPServers = nil
	g := newFixture(t, inst, hardened())
	if facts, err := g.client.Facts(ctx); err != nil || facts.NTPServers != "" || g.log.count("ntp-conf/ntp-servers: none (404)") != 1 {
		t.Errorf("without ntp-conf: %+v, %v\n%s", facts, err, g.log)
	}

	inst.NTPServers = []string{"10.0.0.1"}
	h := newFixture(t, inst, hardened())
	h.srv.SetFaults(ecsmeta.Faults{FailNext: 1 << 20, FailPaths: []string{"/latest/meta-data/ntp-conf/"}})
	start := h.clock.Now()
	facts, err = h.client.Facts(ctx)
	if err != nil || facts.NTPServers != "" || facts.InstanceID != inst.InstanceID {
		t.Errorf("ntp-conf failing: %+v, %v; want the other facts and no servers", facts, err)
	}
	if spent := h.clock.Now().Sub(start); spent > ntpTimeout+DefaultAttemptTimeout {
		t.Errorf("a failing ntp-conf held Facts for %s", spent)
	}

	servers, bad := ParseNTPServers("10.0.0.1\n[Time]\nFallbackNTP=x , ntp.aliyun.com\n")
	if strings.Join(servers, " ") != "10.0.0.1 ntp.aliyun.com" || len(bad) != 2 {
		t.Errorf("ParseNTPServers = %q, bad %q", servers, bad)
	}
}
