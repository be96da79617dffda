// Package ecsapi emulates the parts of Alibaba Cloud ECS (API 2014-05-26),
// ESS (Auto Scaling, API 2014-08-28) and OSS that drover publish and drover
// rollout call, for tests. The official SDKs are the definition: request
// parameters are the SDK requests' query names, ECS/ESS answer JSON that
// unmarshals into the SDK's *Response structs, OSS answers the XML of the v2
// SDK, and errors carry the documented codes and HTTP statuses, so the code
// under test runs unchanged against it.
//
// Pointing the SDKs at a started Server (eps := srv.Start(ctx)):
//
//	ecsClient, _ := ecs.NewClientWithAccessKey(region, id, secret)
//	ecsClient.Domain = eps.ECS // host:port; sdk.Config's default Scheme is "HTTP"
//	essClient, _ := ess.NewClientWithAccessKey(region, id, secret)
//	essClient.Domain = eps.ESS
//	cfg := oss.LoadDefaultConfig().
//		WithCredentialsProvider(credentials.NewStaticCredentialsProvider(id, secret)).
//		WithRegion(region).
//		WithEndpoint(eps.OSS). // an IP endpoint makes the SDK use path-style URLs
//		WithDisableSSL(true).
//		WithUsePathStyle(true)
//	ossClient := oss.NewClient(cfg)
//
// Scaling groups converge in the background as ESS does: missing instances
// are launched through the Config's Launcher from the group's launch template
// version, removed ones are stopped and released.
package ecsapi

import (
	"context"
	"crypto/rand"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/url"
	"os"
	"strings"
	"sync"
	"time"
)

// API versions the RPC endpoints accept.
const (
	ECSVersion = "2014-05-26"
	ESSVersion = "2014-08-28"
)

// Config fixes the emulated account for the Server's lifetime.
type Config struct {
	// AccessKeyID and AccessKeySecret are the only credentials accepted. RPC
	// signatures (HMAC-SHA1) are verified; OSS requests are checked for the key ID only.
	AccessKeyID     string
	AccessKeySecret string
	// Region is the default region of requests that name none.
	Region string
	// ImportDelay is how long an ImportImage or CopyImage stays Creating.
	ImportDelay time.Duration
	// Launcher starts scaling group instances; nil fails every launch.
	Launcher Launcher
	// Log receives one line per request when set.
	Log io.Writer
	// Dir holds OSS objects; empty means a temporary directory removed by Close.
	Dir string
	// HookSecond is how long one second of a lifecycle hook's
	// HeartbeatTimeout lasts (default a second), so that a test can see
	// the documented minimum of 30 s run out in less.
	HookSecond time.Duration
	// LaunchRetry is how long a group whose launch failed waits before
	// trying again (default DefaultLaunchRetry: ESS does not document it).
	LaunchRetry time.Duration
	// Listen are the addresses (host:port) the three services listen on;
	// an empty one is 127.0.0.1 with a free port.
	Listen Endpoints
}

// Endpoints are the listening addresses (host:port) of the three services.
type Endpoints struct {
	ECS, ESS, OSS string
}

// Server is the emulated cloud. It is safe for concurrent use.
type Server struct {
	cfg     Config
	dir     string
	tempDir bool
	dirErr  error

	ctx    context.Context // cancelled by Close; launches and stops run under it
	cancel context.CancelFunc
	kick   chan struct{}
	wg     sync.WaitGroup

	mu        sync.Mutex
	images    map[string]*image
	templates map[string]*launchTemplate
	instances map[string]*instance
	groups    map[string]*group
	groupIDs  []string // AddScalingGroup order
	buckets   map[string]*bucket
	uploads   map[string]*upload
	throttle  map[string]int
	lose      map[string]int // LoseAnswerNext
	// tokens holds each successful call made with a ClientToken, by
	// product, action and token (see idempotent in rpc.go).
	tokens     map[string]tokenCall
	failLaunch int
	failImport int
	noStock    map[string]bool // zones out of stock (StockOut)
	quota      int             // instances per region (SetInstanceQuota); 0: no limit
	servers    []*http.Server
	hooks      map[int]func(Call)
	nextHook   int
}

// New returns a server; Start serves it, Close releases it.
func New(cfg Config) *Server {
	if cfg.Region == "" {
		cfg.Region = "cn-test"
	}
	s := &Server{
		cfg:       cfg,
		kick:      make(chan struct{}, 1),
		images:    map[string]*image{},
		templates: map[string]*launchTemplate{},
		instances: map[string]*instance{},
		groups:    map[string]*group{},
		buckets:   map[string]*bucket{},
		uploads:   map[string]*upload{},
		throttle:  map[string]int{},
		lose:      map[string]int{},
		tokens:    map[string]tokenCall{},
	}
	s.dir = cfg.Dir
	if s.dir == "" {
		s.dir, s.dirErr = os.MkdirTemp("", "ecsapi-")
		s.tempDir = s.dirErr == nil
	}
	s.ctx, s.cancel = context.WithCancel(context.Background())
	s.wg.Add(1)
	go s.convergeLoop()
	return s
}

// Start listens on three 127.0.0.1 ports and serves until ctx ends or Close.
func (s *Server) Start(ctx context.Context) (Endpoints, error) {
	if s.dirErr != nil {
		return Endpoints{}, fmt.Errorf("creating the OSS directory: %w", s.dirErr)
	}
	var eps Endpoints
	for _, e := range []struct {
		addr   *string
		listen string
		h      http.Handler
	}{{&eps.ECS, s.cfg.Listen.ECS, s.ECSHandler()}, {&eps.ESS, s.cfg.Listen.ESS, s.ESSHandler()}, {&eps.OSS, s.cfg.Listen.OSS, s.OSSHandler()}} {
		if e.listen == "" {
			e.listen = "127.0.0.1:0"
		}
		ln, err := net.Listen("tcp", e.listen)
		if err != nil {
			s.Close()
			return Endpoints{}, fmt.Errorf("listening for the emulated API: %w", err)
		}
		srv := &http.Server{Handler: e.h, ReadHeaderTimeout: 10 * time.Second}
		s.mu.Lock()
		s.servers = append(s.servers, srv)
		s.mu.Unlock()
		*e.addr = ln.Addr().String()
		go func() { _ = srv.Serve(ln) }()
	}
	go func() {
		select {
		case <-ctx.Done():
			s.Close()
		case <-s.ctx.Done():
		}
	}()
	return eps, nil
}

// Close stops serving, stops every running instance and removes the
// temporary OSS directory. It is safe to call more than once.
func (s *Server) Close() {
	s.mu.Lock()
	servers := s.servers
	s.servers = nil
	var running []Instance
	for _, in := range s.instances {
		if in.handle != nil {
			running = append(running, in.handle)
			in.handle = nil
		}
	}
	s.mu.Unlock()
	for _, srv := range servers {
		_ = srv.Close()
	}
	stopCtx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	for _, h := range running {
		_ = h.Stop(stopCtx)
	}
	s.cancel()
	s.wg.Wait()
	if s.tempDir {
		_ = os.RemoveAll(s.dir)
	}
}

// ThrottleNext makes the next n calls of action (an ECS or ESS action name)
// fail with Throttling.User, as the API's flow control does.
func (s *Server) ThrottleNext(action string, n int) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.throttle[action] += n
}

// LoseAnswerNext makes the next n successful calls of action take effect
// and then answer 503 ServiceUnavailable, as when the answer is lost on the
// way back: the case ClientToken is for (ECS, "How to ensure idempotence":
// a client retries on 500 InternalError, 503 ServiceUnavailable or no
// answer).
func (s *Server) LoseAnswerNext(action string, n int) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.lose[action] += n
}

// FailLaunch makes the next n instance launches fail; each failure fails its
// scaling activity and ESS launches a replacement later.
func (s *Server) FailLaunch(n int) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.failLaunch += n
}

// FailImport makes the next n ImportImage calls end in CreateFailed once
// their ImportDelay has passed.
func (s *Server) FailImport(n int) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.failImport += n
}

// Call is an ECS or ESS request that succeeded, as AfterCall hooks see it.
type Call struct {
	Product string // "ecs" or "ess"
	Action  string
	Params  url.Values
}

// AfterCall registers fn to run after every successful ECS or ESS call has
// taken effect and before its answer is sent, so a test can act at an exact
// point of a client's sequence (kill it after a given call, say). fn runs
// on the request's goroutine without the server's lock; remove unregisters
// it.
func (s *Server) AfterCall(fn func(Call)) (remove func()) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.hooks == nil {
		s.hooks = map[int]func(Call){}
	}
	id := s.nextHook
	s.nextHook++
	s.hooks[id] = fn
	return func() {
		s.mu.Lock()
		defer s.mu.Unlock()
		delete(s.hooks, id)
	}
}

func (s *Server) afterCall(product string, p url.Values) {
	s.mu.Lock()
	var fns []func(Call)
	for _, fn := range s.hooks {
		fns = append(fns, fn)
	}
	s.mu.Unlock()
	for _, fn := range fns {
		fn(Call{Product: product, Action: p.Get("Action"), Params: p})
	}
}

func (s *Server) logf(format string, args ...any) {
	if s.cfg.Log != nil {
		fmt.Fprintf(s.cfg.Log, format+"\n", args...)
	}
}

// newID returns prefix plus n random lowercase letters and digits, the shape
// of ECS resource IDs (m-…, i-…, lt-…, asg-…).
func newID(prefix string, n int) string {
	const alphabet = "abcdefghijklmnopqrstuvwxyz0123456789"
	b := make([]byte, n)
	if _, err := rand.Read(b); err != nil {
		panic(err)
	}
	for i := range b {
		b[i] = alphabet[int(b[i])%len(alphabet)]
	}
	return prefix + string(b)
}

// newRequestID returns an uppercase UUID, the shape of the RequestId the
// APIs answer.
func newRequestID() string {
	b := make([]byte, 16)
	if _, err := rand.Read(b); err != nil {
		panic(err)
	}
	return strings.ToUpper(fmt.Sprintf("%x-%x-%x-%x-%x", b[0:4], b[4:6], b[6:8], b[8:10], b[10:16]))
}

var errClosed = errors.New("emulator closed")
