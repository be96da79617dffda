package provider

import (
	"context"
	"errors"
	"fmt"
	mrand "math/rand/v2"
	"net"
	"net/http"
	"net/netip"
	"regexp"
	"strings"
	"sync"
	"time"
	"unicode"
)

// Defaults of ECSClient.
const (
	DefaultBaseURL        = "http://100.100.100.200"
	DefaultTokenTTL       = 6 * time.Hour // 21600 s, the longest the service grants
	DefaultDeadline       = 5 * time.Minute
	DefaultAttemptTimeout = 10 * time.Second
)

// Protocol constants of the hardened metadata service.
const (
	tokenHeader    = "X-aliyun-ecs-metadata-token"
	tokenTTLHeader = "X-aliyun-ecs-metadata-token-ttl-seconds"
	tokenPath      = "/latest/api/token"
	userDataPath   = "/latest/user-data"
	metaDataPath   = "/latest/meta-data/"
	maxTokenTTL    = 21600 * time.Second
)

// Response limits: ECS caps user-data at 32 KiB; meta-data values are short.
const (
	maxECSUserData = 32 << 10
	maxMetaValue   = 64 << 10
)

// ErrNotFound matches (errors.Is) a metadata key or user-data the service
// answered 404 for.
var ErrNotFound = errors.New("not found in the metadata service")

// StatusError is a final HTTP answer other than 200 from the metadata service.
type StatusError struct {
	Method, Path string
	Code         int
	Status       string // "404 Not Found"
}

func (e *StatusError) Error() string { return e.Status }

// Is makes errors.Is(err, ErrNotFound) true for a 404.
func (e *StatusError) Is(target error) bool {
	return target == ErrNotFound && e.Code == http.StatusNotFound
}

// ECSClient reads the ECS instance metadata service. The zero value is ready to
// use with the defaults; fields must not change after the first call. It is safe
// for concurrent use and caches the token, meta-data values and facts, because
// the service is rate-limited.
type ECSClient struct {
	BaseURL string       // default DefaultBaseURL
	HTTP    *http.Client // default: a client that never uses an HTTP proxy
	// TokenTTL is the lifetime asked for tokens (1s..21600s, default 6h). A token
	// is renewed when less than a tenth of it, or a minute, is left, and on a 401.
	TokenTTL time.Duration
	// Deadline bounds each public call (UserData, Facts, Get) including retries.
	Deadline time.Duration
	// AttemptTimeout bounds one HTTP exchange, so a hung request is retried.
	AttemptTimeout time.Duration
	// Log receives one line per attempt; nil discards.
	Log func(string)
	// Now, Sleep and Rand are the clock, the wait between attempts and the jitter
	// source (uniform in [0,1)); tests replace them.
	Now   func() time.Time
	Sleep func(ctx context.Context, d time.Duration) error
	Rand  func() float64

	tokenMu sync.Mutex // held while requesting a token, so callers share one PUT

	mu           sync.Mutex
	token        string
	tokenRenewAt time.Time
	tokenless    bool // the service has no token endpoint
	values       map[string]string
	facts        *Facts
}

// Name implements Provider.
func (c *ECSClient) Name() string { return "ecs" }

// UserData implements Provider: 404 means no user-data; the user-data is
// returned as the service gives it (at most 32 KiB, compressed or not).
func (c *ECSClient) UserData(ctx context.Context) ([]byte, bool, error) {
	ctx, b, cancel := c.budget(ctx)
	defer cancel()
	raw, err := c.get(ctx, b, userDataPath, maxECSUserData)
	if errors.Is(err, ErrNotFound) {
		return nil, false, nil
	}
	if err != nil {
		return nil, false, err
	}
	if len(raw) == 0 {
		return nil, false, nil
	}
	return raw, true, nil
}

// Get returns the meta-data value (or directory listing) at key, relative to
// /latest/meta-data/, e.g. "instance/instance-type". A missing key is an error
// matching ErrNotFound. Values are cached.
func (c *ECSClient) Get(ctx context.Context, key string) (string, error) {
	ctx, b, cancel := c.budget(ctx)
	defer cancel()
	return c.value(ctx, b, key)
}

// factKeys maps meta-data keys to Facts fields. The instance and region ids
// are required: without them a node cannot have a providerID.
var factKeys = []struct {
	key      string
	field    func(*Facts) *string
	required bool
}{
	{"instance-id", func(f *Facts) *string { return &f.InstanceID }, true},
	{"region-id", func(f *Facts) *string { return &f.RegionID }, true},
	{"zone-id", func(f *Facts) *string { return &f.ZoneID }, false},
	{"instance/instance-type", func(f *Facts) *string { return &f.InstanceType }, false},
	{"hostname", func(f *Facts) *string { return &f.Hostname }, false},
	{"private-ipv4", func(f *Facts) *string { return &f.PrivateIPv4 }, false},
	{"mac", func(f *Facts) *string { return &f.MAC }, false},
}

// Facts implements Provider. Each key is fetched once; the result is cached. A
// key the service lacks leaves its field empty, except instance-id and region-id.
func (c *ECSClient) Facts(ctx context.Context) (Facts, error) {
	c.mu.Lock()
	cached := c.facts
	c.mu.Unlock()
	if cached != nil {
		return *cached, nil
	}
	ctx, b, cancel := c.budget(ctx)
	defer cancel()
	var f Facts
	for _, k := range factKeys {
		v, err := c.value(ctx, b, k.key)
		if errors.Is(err, ErrNotFound) && !k.required {
			continue
		}
		if err != nil {
			return Facts{}, fmt.Errorf("reading ECS instance facts: %w", err)
		}
		*k.field(&f) = v
	}
	f.NTPServers = c.ntpServers(ctx)
	c.mu.Lock()
	c.facts = &f
	c.mu.Unlock()
	return f, nil
}

// ntpTimeout bounds the time servers' fetch: they are optional, and a key
// the service keeps failing must not hold up the join for the whole
// deadline.
const ntpTimeout = 20 * time.Second

// ntpServers reads ntp-conf/ntp-servers (one server a line). It never
// fails: without servers timesyncd keeps its defaults (docs/agent.md), so
// a missing key or a failing service is logged and the join goes on.
func (c *ECSClient) ntpServers(ctx context.Context) string {
	const key = "ntp-conf/ntp-servers"
	d := min(ntpTimeout, c.deadline())
	ctx, cancel := context.WithTimeout(ctx, d)
	defer cancel()
	start := c.now()
	v, err := c.value(ctx, budget{start: start, end: start.Add(d)}, key)
	if errors.Is(err, ErrNotFound) {
		c.logf("ecs metadata: %s: none (404); timesyncd keeps its defaults", key)
		return ""
	}
	if err != nil {
		c.logf("ecs metadata: %s: %v; going on without, timesyncd keeps its defaults", key, err)
		return ""
	}
	servers, bad := ParseNTPServers(v)
	for _, b := range bad {
		c.logf("ecs metadata: %s: ignoring %q: not a host name or IP address", key, b)
	}
	return strings.Join(servers, " ")
}

// ParseNTPServers splits a server list (lines, or blanks and commas
// between names) and keeps what is a host name or an IP address, so that
// nothing from the metadata can add a line to timesyncd's configuration.
func ParseNTPServers(v string) (servers, bad []string) {
	for _, s := range strings.FieldsFunc(v, func(r rune) bool { return r == ',' || unicode.IsSpace(r) }) {
		if _, err := netip.ParseAddr(s); err == nil || hostName.MatchString(s) {
			servers = append(servers, strings.ToLower(s))
		} else {
			bad = append(bad, s)
		}
	}
	return servers, bad
}

var hostName = regexp.MustCompile(`^(?i)[a-z0-9]([-a-z0-9]{0,61}[a-z0-9])?(\.[a-z0-9]([-a-z0-9]{0,61}[a-z0-9])?)*\.?$`)

// value fetches one meta-data key within budget b, through the cache.
func (c *ECSClient) value(ctx context.Context, b budget, key string) (string, error) {
	if err := checkKey(key); err != nil {
		return "", err
	}
	c.mu.Lock()
	v, ok := c.values[key]
	c.mu.Unlock()
	if ok {
		return v, nil
	}
	body, err := c.get(ctx, b, metaDataPath+key, maxMetaValue)
	if err != nil {
		return "", err
	}
	v = strings.TrimSpace(string(body))
	c.mu.Lock()
	if c.values == nil {
		c.values = map[string]string{}
	}
	c.values[key] = v
	c.mu.Unlock()
	return v, nil
}

// checkKey refuses keys that would address something outside meta-data.
func checkKey(key string) error {
	bad := key == "" || strings.HasPrefix(key, "/") || strings.ContainsAny(key, "?#% \t\r\n")
	for _, seg := range strings.Split(key, "/") {
		bad = bad || seg == ".." || seg == "."
	}
	if bad {
		return fmt.Errorf("reading ECS meta-data key %q: not a relative key like \"instance/instance-type\"", key)
	}
	return nil
}

// budget is the time limit of one public call, on the client's clock.
type budget struct {
	start, end time.Time
	// quiet leaves a call's successful and final answers out of the log:
	// a poll (SpotTermination) would write a line every few seconds.
	quiet bool
}

// budget starts a call: a context bounded by the deadline in real time (so a
// wedged exchange cannot outlive it) and the same limit on c's clock, which
// decides whether another attempt fits.
func (c *ECSClient) budget(ctx context.Context) (context.Context, budget, context.CancelFunc) {
	d := c.deadline()
	ctx, cancel := context.WithTimeout(ctx, d)
	start := c.now()
	return ctx, budget{start: start, end: start.Add(d)}, cancel
}

func (c *ECSClient) deadline() time.Duration {
	if c.Deadline > 0 {
		return c.Deadline
	}
	return DefaultDeadline
}

func (c *ECSClient) attemptTimeout() time.Duration {
	if c.AttemptTimeout > 0 {
		return c.AttemptTimeout
	}
	return DefaultAttemptTimeout
}

func (c *ECSClient) tokenTTL() time.Duration {
	switch ttl := c.TokenTTL.Truncate(time.Second); {
	case ttl < time.Second:
		return DefaultTokenTTL
	case ttl > maxTokenTTL:
		return maxTokenTTL
	default:
		return ttl
	}
}

func (c *ECSClient) baseURL() string {
	if c.BaseURL != "" {
		return strings.TrimSuffix(c.BaseURL, "/")
	}
	return DefaultBaseURL
}

// directHTTP never consults HTTP_PROXY: the metadata service is link-local, and
// a proxy would add X-Forwarded-For, which makes the token request fail with 403.
var directHTTP = &http.Client{Transport: &http.Transport{
	Proxy:               nil,
	DialContext:         (&net.Dialer{Timeout: 5 * time.Second}).DialContext,
	MaxIdleConnsPerHost: 2,
	IdleConnTimeout:     30 * time.Second,
}}

func (c *ECSClient) httpClient() *http.Client {
	if c.HTTP != nil {
		return c.HTTP
	}
	return directHTTP
}

func (c *ECSClient) now() time.Time {
	if c.Now != nil {
		return c.Now()
	}
	return time.Now()
}

func (c *ECSClient) sleep(ctx context.Context, d time.Duration) error {
	if c.Sleep != nil {
		return c.Sleep(ctx, d)
	}
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-t.C:
		return nil
	case <-ctx.Done():
		return ctx.Err()
	}
}

func (c *ECSClient) rand() float64 {
	if c.Rand != nil {
		return c.Rand()
	}
	return mrand.Float64()
}

func (c *ECSClient) logf(format string, args ...any) {
	if c.Log != nil {
		c.Log(fmt.Sprintf(format, args...))
	}
}
