// Package registry serves container images to a drover node under the QEMU
// smoke test, which has no internet: an in-process OCI registry (plain HTTP,
// go-containerregistry's pkg/registry) holding images that the harness builds
// itself from the tiny Go programs under programs/.
//
// Images (see BuildAndPush), each an OCI image index for linux/amd64 and
// linux/arm64 (the node's containerd pulls its own architecture):
//
//	drover/hello:v1     prints "hello from drover" and its hostname, exits 0
//	drover/probe:v1     inspects the node for the smoke test (programs/probe)
//
// No sandbox ("pause") image: a drover image ships its own and the node
// never pulls one (nodeconfig.DefaultSandboxImage); a pull of one would
// fail here, which the smoke test relies on.
//
// The guest reaches the host's registry over QEMU user networking at
// 100.64.0.2:<Port>. A node file points containerd (2.x, config version 3) at
// it in one of two ways:
//
//  1. Directly: Pods use 100.64.0.2:<Port>/drover/hello:v1. containerd needs
//     a hosts.toml for that host, because it would otherwise try HTTPS.
//
//  2. As a mirror of an upstream name: in config.toml
//
//     [plugins."io.containerd.cri.v1.images".registry]
//     config_path = "/etc/containerd/certs.d"
//
//     (containerd 1.7: [plugins."io.containerd.grpc.v1.cri".registry]) and
//     /etc/containerd/certs.d/<upstream>/hosts.toml = HostsTOML("http://100.64.0.2:<Port>").
//     A mirror keeps the repository path, so <upstream>/drover/hello:v1 is
//     fetched from http://100.64.0.2:<Port>/v2/drover/hello/manifests/v1.
//
// The integration test proves option 2 with a real containerd and ctr.
//
// RequireToken makes repositories under a prefix private, as an ACR
// instance's are: pulls need the docker token exchange with a login an
// emulated ACR issued (auth.go; FetchManifest is a client of it that needs
// neither containerd nor the kubelet).
package registry

import (
	"context"
	"errors"
	"fmt"
	"github.com/drover-os/drover/internal/httpstatus"
	"io"
	"log"
	"net"
	"net/http"
	"strconv"
	"strings"
	"sync"

	"github.com/google/go-containerregistry/pkg/name"
	ggcrregistry "github.com/google/go-containerregistry/pkg/registry"
	v1 "github.com/google/go-containerregistry/pkg/v1"
	"github.com/google/go-containerregistry/pkg/v1/remote"
)

// Registry is a running in-memory OCI registry. Its content is lost on Close.
type Registry struct {
	ln     net.Listener
	srv    *http.Server
	inner  http.Handler
	done   chan error
	logger *log.Logger

	mu       sync.Mutex
	requests []Request
	refusing bool
	// private, check and bearers are the token auth (auth.go).
	private string
	check   CheckLogin
	bearers map[string]bearer
}

// Request is one request the registry was asked, as it saw it.
type Request struct {
	Method, Path string
	Refused      bool // answered 503 while Refuse(true)
	// Status is the HTTP status the registry answered (what the client
	// read, recorded from the response itself).
	Status int
	// Who is the login a private repository's request was allowed for
	// (or, at AuthPath, a token was issued to); "" otherwise.
	Who string
}

// maxRequests bounds the request record: a smoke run makes a few hundred.
const maxRequests = 10000

// ServeHTTP records the request and, unless the registry is refusing,
// serves it.
func (r *Registry) ServeHTTP(w http.ResponseWriter, req *http.Request) {
	r.mu.Lock()
	refusing := r.refusing
	r.mu.Unlock()
	rec := Request{Method: req.Method, Path: req.URL.Path, Refused: refusing}
	sw := &httpstatus.Writer{ResponseWriter: w}
	w = sw
	defer func() {
		rec.Status = sw.Status()
		r.mu.Lock()
		if len(r.requests) < maxRequests {
			r.requests = append(r.requests, rec)
		}
		r.mu.Unlock()
	}()
	if refusing {
		// What a registry behind a broken route or an outage answers.
		http.Error(w, "registry refusing every request (drover smoke: no registry reachable)", http.StatusServiceUnavailable)
		return
	}
	if req.URL.Path == AuthPath {
		rec.Who = r.serveAuth(w, req)
		return
	}
	who, ok := r.authorize(w, req)
	if !ok {
		return
	}
	if rec.Who = who; who != "" {
		// Before the answer: whoever reads the log once the pull is done
		// finds the line.
		r.logger.Printf("%s %s for %s", req.Method, req.URL.Path, who)
	}
	r.inner.ServeHTTP(w, req)
}

// Refuse makes the registry answer every request 503 (true) or serve again
// (false): a node that has no registry it can reach.
func (r *Registry) Refuse(on bool) {
	r.mu.Lock()
	r.refusing = on
	r.mu.Unlock()
}

// Requests returns the requests seen so far, in order.
func (r *Registry) Requests() []Request {
	r.mu.Lock()
	defer r.mu.Unlock()
	return append([]Request(nil), r.requests...)
}

// Start listens on addr (for example "127.0.0.1:0", or "0.0.0.0:0" to be
// reachable from other hosts) and serves the registry until Close. Every
// request is logged to log; nil discards the log.
func Start(ctx context.Context, addr string, log io.Writer) (*Registry, error) {
	if log == nil {
		log = io.Discard
	}
	var lc net.ListenConfig
	ln, err := lc.Listen(ctx, "tcp", addr)
	if err != nil {
		return nil, fmt.Errorf("starting image registry on %s: %w (pick a free address or port 0)", addr, err)
	}
	logger := newLogger(log)
	r := &Registry{
		ln:     ln,
		logger: logger,
		// Without our logger the library logs every request to stderr.
		inner: ggcrregistry.New(ggcrregistry.Logger(logger)),
		done:  make(chan error, 1),
	}
	r.srv = &http.Server{Handler: r, ErrorLog: logger}
	go func() { r.done <- r.srv.Serve(ln) }()
	return r, nil
}

func newLogger(w io.Writer) *log.Logger { return log.New(w, "registry: ", 0) }

// Addr is the host:port at which the host itself reaches the registry. A
// wildcard listen address is reported as 127.0.0.1, which a client can dial.
func (r *Registry) Addr() string {
	a := r.ln.Addr().(*net.TCPAddr)
	ip := a.IP
	if ip == nil || ip.IsUnspecified() {
		ip = net.IPv4(127, 0, 0, 1)
	}
	return net.JoinHostPort(ip.String(), strconv.Itoa(a.Port))
}

// Port is the TCP port the registry listens on; a guest combines it with the
// address at which it sees the host.
func (r *Registry) Port() int { return r.ln.Addr().(*net.TCPAddr).Port }

// Close stops the registry and drops its content.
func (r *Registry) Close() error {
	err := r.srv.Close()
	if serveErr := <-r.done; serveErr != nil && !errors.Is(serveErr, http.ErrServerClosed) {
		err = errors.Join(err, serveErr)
	}
	if err != nil {
		return fmt.Errorf("stopping image registry on %s: %w", r.Addr(), err)
	}
	return nil
}

// Push uploads img to reg as repo:tag (repo without the registry host, for
// example "drover/hello").
func Push(ctx context.Context, reg *Registry, repo, tag string, img v1.Image) error {
	ref, err := name.NewTag(reg.Addr()+"/"+repo+":"+tag, name.Insecure, name.StrictValidation)
	if err != nil {
		return fmt.Errorf("pushing image %s:%s: invalid reference: %w", repo, tag, err)
	}
	if err := remote.Write(ref, img, remote.WithContext(ctx), reg.transport(repo)); err != nil {
		return fmt.Errorf("pushing image %s to the harness registry: %w", ref, err)
	}
	return nil
}

// PushIndex uploads a multi-architecture image index (and every image it
// names) to reg as repo:tag.
func PushIndex(ctx context.Context, reg *Registry, repo, tag string, idx v1.ImageIndex) error {
	ref, err := name.NewTag(reg.Addr()+"/"+repo+":"+tag, name.Insecure, name.StrictValidation)
	if err != nil {
		return fmt.Errorf("pushing image index %s:%s: invalid reference: %w", repo, tag, err)
	}
	if err := remote.WriteIndex(ref, idx, remote.WithContext(ctx), reg.transport(repo)); err != nil {
		return fmt.Errorf("pushing image index %s to the harness registry: %w", ref, err)
	}
	return nil
}

// transport is how Push reaches repo: over the network, or in-process
// for a private repository, which refuses pushes over the network.
func (r *Registry) transport(repo string) remote.Option {
	r.mu.Lock()
	private := r.private != "" && strings.HasPrefix(repo, r.private)
	r.mu.Unlock()
	if private {
		return remote.WithTransport(inProcess{r.inner})
	}
	return remote.WithTransport(remote.DefaultTransport)
}

// HostsTOML renders a containerd hosts.toml (certs.d/<upstream>/hosts.toml)
// that sends every pull of the upstream namespace to mirror, a URL with
// scheme such as "http://100.64.0.2:5000". server is the mirror too: the smoke
// test has no internet, so falling back to the upstream would only turn a
// missing image into a slow timeout instead of a clear "not found".
func HostsTOML(mirror string) []byte {
	mirror = strings.TrimRight(mirror, "/")
	return fmt.Appendf(nil, "server = %q\n\n[host.%q]\n  capabilities = [\"pull\", \"resolve\"]\n", mirror, mirror)
}
