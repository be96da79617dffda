// Package cluster runs a real local Kubernetes control plane for drover's
// QEMU smoke tests: etcd (embedded in this process), kube-apiserver and
// kube-controller-manager (child processes built from the Go module proxy
// at the node's Kubernetes version), a cluster CA, and everything kubelet
// TLS bootstrap needs — a bootstrap token, the RBAC that lets its holder
// request a node client certificate and have it approved, and the
// cluster-info ConfigMap for CA-pinned discovery.
//
// A guest on QEMU user-mode networking reaches the host's loopback through
// the network's host address (100.64.0.2 with net=100.64.0.0/10): slirp
// turns connections to that address into connections to 127.0.0.1, so the
// apiserver listens on loopback by default and is not exposed to the
// host's networks.
//
// The state dir keeps the CA, the service-account key and etcd's data
// across starts, so a VM whose disk is kept can rejoin a restarted cluster;
// leaf certificates and the bootstrap token are new at every start.
package cluster

import (
	"context"
	"crypto/tls"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/url"
	"os"
	"sync"
	"time"

	"go.etcd.io/etcd/server/v3/embed"

	"github.com/drover-os/drover/image/cache"
)

// Defaults of Config.
const (
	DefaultPort        = 6443
	DefaultBindAddress = "127.0.0.1"
	// DefaultGuestHost is the host as a guest sees it on QEMU user-mode
	// networking with net=100.64.0.0/10.
	DefaultGuestHost = "100.64.0.2"
)

// readyTimeout bounds each wait of Start (apiserver ready, controller
// manager healthy, default service account): generous, because the first
// start on a loaded 2-core machine is slow, but bounded, because a broken
// component must fail the run with its log, not hang it.
const readyTimeout = 3 * time.Minute

// Config describes a local cluster.
type Config struct {
	// StateDir holds the binaries, PKI, etcd data, kubeconfigs and logs.
	StateDir string
	// CacheDir is the build cache; empty means $XDG_CACHE_HOME/drover.
	CacheDir string
	// Version is the Kubernetes release of the control plane, e.g.
	// v1.37.2: the recipe's kubelet version, or a newer minor's for a
	// version skew.
	Version string
	// GuestServerURL is the apiserver URL as the guest reaches it; empty
	// means https://100.64.0.2:<port>. Its host is added to the serving
	// certificate.
	GuestServerURL string
	// Port is the apiserver's port; 0 means 6443, or a free port when 6443
	// is taken. An explicit port that is taken is an error.
	Port int
	// BindAddress is where the apiserver listens; empty means 127.0.0.1
	// (enough for QEMU user-mode guests, see the package doc).
	BindAddress string
	// Log receives progress lines; nil discards them.
	Log io.Writer
	// Scheduler also runs kube-scheduler (built on first use), for Pods
	// that do not set nodeName: the e2e suite's. The smoke's set it.
	Scheduler bool
	// DialNode, when set, carries the API server's connections to
	// kubelets, pods and services (its "cluster" egress) through an HTTP
	// CONNECT proxy that dials with it: logs, exec, attach and
	// port-forward to a guest the host cannot route to (egress.go).
	DialNode NodeDialer
}

// Cluster is a running control plane. Stop it when done.
type Cluster struct {
	cfg         Config
	files       layout
	server      string
	guestServer string
	pki         *PKI
	token       string
	client      *restClient

	etcd       *embed.Etcd
	apiserver  *process
	controller *process
	scheduler  *process
	egress     *egressProxy
	unlock     func()

	stopOnce sync.Once
	stopErr  error
}

// Server is the apiserver URL on the host.
func (c *Cluster) Server() string { return c.server }

// GuestServer is the apiserver URL as the guest reaches it.
func (c *Cluster) GuestServer() string { return c.guestServer }

// CAPEM is the cluster CA certificate, for the guest's user-data.
func (c *Cluster) CAPEM() []byte { return c.pki.CA.CertPEM() }

// BootstrapToken is the kubelet bootstrap token "<id>.<secret>", valid for
// 24 hours from Start.
func (c *Cluster) BootstrapToken() string { return c.token }

// AdminKubeconfig is the path of a cluster-admin kubeconfig for the host
// (kubectl --kubeconfig …).
func (c *Cluster) AdminKubeconfig() string { return c.files.kubeconfig("admin") }

// StateDir is the directory holding the cluster's files and logs.
func (c *Cluster) StateDir() string { return c.files.dir }

// Start builds (first time) or finds the control-plane binaries, then
// starts etcd, kube-apiserver and kube-controller-manager, creates the
// bootstrap objects and returns once the cluster can admit a node (also
// one that pins the CA by hash: cluster-info is signed for the token). ctx
// bounds Start only; the cluster runs until Stop (or until this process
// exits: the children die with it).
func Start(ctx context.Context, cfg Config) (_ *Cluster, err error) {
	if cfg.Log == nil {
		cfg.Log = io.Discard
	}
	if cfg.StateDir == "" {
		return nil, errors.New("starting local cluster: no state directory given")
	}
	if cfg.BindAddress == "" {
		cfg.BindAddress = DefaultBindAddress
	}
	if cfg.CacheDir == "" {
		if cfg.CacheDir, err = cache.DefaultDir(os.Getenv); err != nil {
			return nil, fmt.Errorf("starting local cluster: %w", err)
		}
	}
	c := &Cluster{cfg: cfg, files: layout{dir: cfg.StateDir}}
	for _, d := range c.files.dirs() {
		if err := os.MkdirAll(d, 0o755); err != nil {
			return nil, fmt.Errorf("starting local cluster: %w", err)
		}
	}
	if c.unlock, err = lockStateDir(cfg.StateDir); err != nil {
		return nil, err
	}
	defer func() {
		if err != nil {
			c.Stop()
		}
	}()
	if err := c.install(ctx); err != nil {
		return nil, err
	}
	if err := c.startAPIServer(ctx); err != nil {
		return nil, err
	}
	if err := c.bootstrap(ctx); err != nil {
		return nil, err
	}
	if err := c.startControllerManager(ctx); err != nil {
		return nil, err
	}
	if cfg.Scheduler {
		if err := c.startScheduler(ctx); err != nil {
			return nil, err
		}
	}
	if err := c.waitClusterInfoSigned(ctx); err != nil {
		return nil, err
	}
	fmt.Fprintf(cfg.Log, "local cluster %s ready at %s (guest: %s); kubeconfig %s\n",
		cfg.Version, c.server, c.guestServer, c.AdminKubeconfig())
	return c, nil
}

// install puts the binaries into the state dir.
func (c *Cluster) install(ctx context.Context) error {
	buildLog, err := os.OpenFile(c.files.log("build"), os.O_WRONLY|os.O_CREATE|os.O_APPEND, 0o644)
	if err != nil {
		return fmt.Errorf("starting local cluster: %w", err)
	}
	defer buildLog.Close()
	bins, err := BuildBinaries(ctx, c.cfg.CacheDir, c.cfg.Version, c.cfg.Log, buildLog)
	if err != nil {
		return fmt.Errorf("%w (go command output: %s)", err, c.files.log("build"))
	}
	if err := install(bins.APIServer, c.files.bin("kube-apiserver")); err != nil {
		return err
	}
	if c.cfg.Scheduler {
		p, err := BuildScheduler(ctx, c.cfg.CacheDir, c.cfg.Version, c.cfg.Log, buildLog)
		if err != nil {
			return fmt.Errorf("%w (go command output: %s)", err, c.files.log("build"))
		}
		if err := install(p, c.files.bin("kube-scheduler")); err != nil {
			return err
		}
	}
	return install(bins.ControllerManager, c.files.bin("kube-controller-manager"))
}

// startAPIServer sets up the PKI and etcd and runs kube-apiserver until it
// reports ready.
func (c *Cluster) startAPIServer(ctx context.Context) error {
	port, err := pickPort(c.cfg.BindAddress, c.cfg.Port)
	if err != nil {
		return err
	}
	c.server = httpsURL("127.0.0.1", port)
	c.guestServer = c.cfg.GuestServerURL
	if c.guestServer == "" {
		c.guestServer = httpsURL(DefaultGuestHost, port)
	}
	gu, err := url.Parse(c.guestServer)
	if err != nil || gu.Scheme != "https" || gu.Hostname() == "" {
		return fmt.Errorf("starting local cluster: guest server URL %q is not https://host[:port]", c.guestServer)
	}
	// The advertised address lands in the default/kubernetes endpoints;
	// it must be an IP, and the guest's view is the useful one.
	advertise := DefaultGuestHost
	if net.ParseIP(gu.Hostname()) != nil {
		advertise = gu.Hostname()
	}

	var fresh bool
	if c.pki, fresh, err = setupPKI(c.files.pki(), gu.Hostname(), time.Now()); err != nil {
		return fmt.Errorf("starting local cluster: %w", err)
	}
	if fresh {
		// Data from another CA (and service-account key) would hold
		// tokens and node objects nothing can use any more.
		if err := os.RemoveAll(c.files.etcd()); err != nil {
			return fmt.Errorf("starting local cluster: clearing old etcd data: %w", err)
		}
	}
	admin := c.pki.Leafs["admin"]
	adminCert, err := tls.X509KeyPair(admin.CertPEM, admin.KeyPEM)
	if err != nil {
		return fmt.Errorf("starting local cluster: loading admin certificate: %w", err)
	}
	if c.client, err = newRESTClient(c.server, c.CAPEM(), &adminCert, ""); err != nil {
		return err
	}
	if err := c.writeKubeconfigs(); err != nil {
		return err
	}

	etcdURL := ""
	if c.etcd, etcdURL, err = startEtcd(ctx, c.files.etcd(), c.files.log("etcd")); err != nil {
		return err
	}
	args := apiServerArgs(c.files, etcdURL, c.cfg.BindAddress, port, advertise)
	if c.cfg.DialNode != nil {
		sock, conf := c.files.path("egress.sock"), c.files.path("egress-selector.yaml")
		if err := os.WriteFile(conf, egressConfig(sock), 0o644); err != nil {
			return fmt.Errorf("starting local cluster: %w", err)
		}
		if c.egress, err = startEgressProxy(sock, c.cfg.DialNode, c.cfg.Log); err != nil {
			return err
		}
		args = append(args, "--egress-selector-config-file="+conf)
	}
	fmt.Fprintf(c.cfg.Log, "starting kube-apiserver on %s (log: %s)\n", c.server, c.files.log("kube-apiserver"))
	c.apiserver, err = startProcess("kube-apiserver", c.files.bin("kube-apiserver"), args, c.files.log("kube-apiserver"))
	if err != nil {
		return err
	}
	return waitFor(ctx, "kube-apiserver to become ready", c.apiserver, func(ctx context.Context) error {
		return c.client.do(ctx, http.MethodGet, "/readyz", nil, nil)
	})
}

// writeKubeconfigs writes the admin and controller-manager kubeconfigs.
func (c *Cluster) writeKubeconfigs() error {
	for _, k := range []struct{ name, user string }{{"admin", "drover-admin"}, {"controller-manager", "system:kube-controller-manager"},
		{"scheduler", "system:kube-scheduler"}} {
		kp := c.pki.Leafs[k.name]
		data, err := Kubeconfig{ClusterName: ClusterName, Server: c.server, CAPEM: c.CAPEM(), User: k.user,
			CertPEM: kp.CertPEM, KeyPEM: kp.KeyPEM}.Marshal()
		if err != nil {
			return err
		}
		if err := writeFiles(c.files.dir, map[string][]byte{k.name + ".kubeconfig": data}); err != nil {
			return err
		}
	}
	return nil
}

// bootstrap creates the token and the objects kubelet TLS bootstrap uses.
func (c *Cluster) bootstrap(ctx context.Context) error {
	token, err := NewBootstrapToken()
	if err != nil {
		return err
	}
	info, err := Kubeconfig{Server: c.guestServer, CAPEM: c.CAPEM()}.Marshal()
	if err != nil {
		return err
	}
	objs, err := bootstrapObjects(token, time.Now().Add(tokenTTL), info)
	if err != nil {
		return err
	}
	if err := createObjects(ctx, c.client, objs); err != nil {
		return fmt.Errorf("starting local cluster: %w", err)
	}
	c.token = token
	return nil
}

// startControllerManager runs kube-controller-manager until it is healthy
// and has created the default service account (pods need it to be
// admitted, so a smoke test creating one right after Start would race).
func (c *Cluster) startControllerManager(ctx context.Context) (err error) {
	if c.controller, err = c.startComponent(ctx, "kube-controller-manager", controllerManagerArgs); err != nil {
		return err
	}
	return waitFor(ctx, "the default service account", c.controller, func(ctx context.Context) error {
		return c.client.do(ctx, http.MethodGet, "/api/v1/namespaces/default/serviceaccounts/default", nil, nil)
	})
}

// startComponent runs the control-plane program name (kube-scheduler,
// kube-controller-manager) with args for a free loopback port of its own
// until its /healthz answers over TLS with a certificate of the cluster CA.
func (c *Cluster) startComponent(ctx context.Context, name string, args func(layout, int) []string) (*process, error) {
	port, err := pickPort("127.0.0.1", -1)
	if err != nil {
		return nil, err
	}
	fmt.Fprintf(c.cfg.Log, "starting %s (log: %s)\n", name, c.files.log(name))
	p, err := startProcess(name, c.files.bin(name), args(c.files, port), c.files.log(name))
	if err != nil {
		return nil, err
	}
	health, err := newRESTClient(httpsURL("127.0.0.1", port), c.CAPEM(), nil, "")
	if err != nil {
		return p, err
	}
	defer health.close()
	return p, waitFor(ctx, name+" to become healthy", p, func(ctx context.Context) error {
		return health.do(ctx, http.MethodGet, "/healthz", nil, nil)
	})
}

// waitFor polls check until it succeeds, p exits, readyTimeout passes or
// ctx ends; the error carries check's last error and p's log tail.
func waitFor(ctx context.Context, what string, p *process, check func(context.Context) error) error {
	ctx, cancel := context.WithTimeout(ctx, readyTimeout)
	defer cancel()
	tick := time.NewTicker(500 * time.Millisecond)
	defer tick.Stop()
	for {
		cctx, ccancel := context.WithTimeout(ctx, 10*time.Second)
		last := check(cctx)
		ccancel()
		if last == nil {
			return nil
		}
		if err := p.exitError(); err != nil {
			return fmt.Errorf("waiting for %s: %w", what, err)
		}
		select {
		case <-ctx.Done():
			return fmt.Errorf("waiting for %s: %w (last error: %v); last lines of %s:\n%s",
				what, ctx.Err(), last, p.logPath, logTail(p.logPath, 20))
		case <-tick.C:
		}
	}
}

// Stop stops kube-scheduler, kube-controller-manager, kube-apiserver and etcd, in that
// order, and waits for each. It is safe to call more than once.
func (c *Cluster) Stop() error {
	c.stopOnce.Do(func() {
		var errs []error
		for _, p := range []*process{c.scheduler, c.controller, c.apiserver} {
			if p != nil {
				errs = append(errs, p.stop(stopGrace))
			}
		}
		if c.client != nil {
			c.client.close()
		}
		errs = append(errs, c.egress.close())
		if c.etcd != nil {
			c.etcd.Close()
		}
		if c.unlock != nil {
			c.unlock()
		}
		c.stopErr = errors.Join(errs...)
	})
	return c.stopErr
}
