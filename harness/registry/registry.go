// Package registry serves container images to a drover node under the QEMU
// smoke test, which has no internet: an in-process OCI registry (plain HTTP,
// go-containerregistry's pkg/registry) holding images that the harness builds
// itself from the tiny Go programs under programs/.
//
// Images (see BuildAndPush), each an OCI image index for linux/amd64 and
// linux/arm64 (the node's containerd pulls its own architecture):
//
//	pause:3.10          the sandbox image, under the repository name that
//	                    registry.k8s.io/pause:3.10 maps to through a mirror
//	drover/pause:3.10   the same image, for a node that names the registry directly
//	drover/hello:v1     prints "hello from drover" and its hostname, exits 0
//
// The guest reaches the host's registry over QEMU user networking at
// 100.64.0.2:<Port>. A node file points containerd (2.x, config version 3) at
// it in one of two ways:
//
//  1. Directly: the sandbox image "100.64.0.2:<Port>/drover/pause:3.10" and Pods
//     use 100.64.0.2:<Port>/drover/hello:v1. containerd needs a hosts.toml for
//     that host too, because it would otherwise try HTTPS.
//
//  2. As a mirror of the upstream name, keeping the default sandbox image:
//     in config.toml
//
//     [plugins."io.containerd.cri.v1.images".registry]
//     config_path = "/etc/containerd/certs.d"
//
//     (containerd 1.7: [plugins."io.containerd.grpc.v1.cri".registry]) and
//     /etc/containerd/certs.d/registry.k8s.io/hosts.toml = HostsTOML("http://100.64.0.2:<Port>").
//     A mirror keeps the repository path, so registry.k8s.io/pause:3.10 is
//     fetched from http://100.64.0.2:<Port>/v2/pause/manifests/3.10, which is
//     why the pause image is also pushed as plain "pause".
//
// The integration test proves option 2 with a real containerd and ctr.
package registry

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log"
	"net"
	"net/http"
	"strconv"
	"strings"

	"github.com/google/go-containerregistry/pkg/name"
	ggcrregistry "github.com/google/go-containerregistry/pkg/registry"
	v1 "github.com/google/go-containerregistry/pkg/v1"
	"github.com/google/go-containerregistry/pkg/v1/remote"
)

// Registry is a running in-memory OCI registry. Its content is lost on Close.
type Registry struct {
	ln   net.Listener
	srv  *http.Server
	done chan error
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
		ln: ln,
		srv: &http.Server{
			// Without our logger the library logs every request to stderr.
			Handler:  ggcrregistry.New(ggcrregistry.Logger(logger)),
			ErrorLog: logger,
		},
		done: make(chan error, 1),
	}
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
	if err := remote.Write(ref, img, remote.WithContext(ctx)); err != nil {
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
	if err := remote.WriteIndex(ref, idx, remote.WithContext(ctx)); err != nil {
		return fmt.Errorf("pushing image index %s to the harness registry: %w", ref, err)
	}
	return nil
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
