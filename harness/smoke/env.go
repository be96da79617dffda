// Package smoke is drover's smoke harness: it boots an image under QEMU as
// if it were an ECS instance — SMBIOS product "Alibaba Cloud ECS", the ECS
// metadata service emulated at 100.100.100.200, the user-data from a
// launch template — against a real local control plane and a local
// registry, and checks that the node joins, becomes Ready and runs Pods.
//
// Networking: QEMU user-mode networking with net=100.64.0.0/10, so that
// the metadata address 100.100.100.200 is inside the guest's network and
// slirp can forward it (guestfwd) to the emulator on the host; the host
// itself (control plane, registry) is 100.64.0.2 from the guest.
package smoke

import (
	"context"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"strconv"

	"github.com/drover-os/drover/agent/nodeconfig"
	"github.com/drover-os/drover/agent/userdata"
	"github.com/drover-os/drover/harness/acrapi"
	"github.com/drover-os/drover/harness/cluster"
	"github.com/drover-os/drover/harness/ecsmeta"
	"github.com/drover-os/drover/harness/qemu"
	"github.com/drover-os/drover/harness/registry"
)

// Guest network facts (QEMU user networking with net=100.64.0.0/10).
const (
	GuestNet     = "100.64.0.0/10"
	HostFromVM   = "100.64.0.2"
	GuestIP      = "100.64.0.15"
	MetadataAddr = "100.100.100.200:80"
)

// Options configure the environment.
type Options struct {
	WorkDir  string // state: cluster, VMs, logs
	CacheDir string // binaries built from the Go module proxy
	Version  string // Kubernetes version of the control plane (the image's kubelet)
	Drover   string // the drover binary, for the metadata relay (default: this executable)
	Log      io.Writer
	Console  io.Writer // serial consoles (nil: only the log files)
	// PinCA renders the user-data with the cluster CA pinned by caHash
	// instead of embedded, so the join goes through CA discovery.
	PinCA bool
	// Conformance adds kube-scheduler, which Kubernetes' e2e suite needs
	// for its pods (the smoke's own set nodeName). The API server reaches
	// the guest's kubelet (logs, exec, attach, port-forward) in every
	// environment with a cluster: the host probes are execs (probe.go).
	Conformance bool
}

// Env is a running control plane, registry and metadata emulator.
type Env struct {
	opts     Options
	Cluster  *cluster.Cluster
	Registry *registry.Registry
	Metadata *ecsmeta.Server
	metaLn   net.Listener
	// kubeletFwd is the host address QEMU forwards to the guest's
	// kubelet port, which the API server dials (dialNode); empty without
	// a cluster.
	kubeletFwd string
	// ACR is the emulated ACR API the node's credential provider calls
	// (acr.go), at 100.64.0.2:<port> from the guest; nil without a
	// cluster.
	ACR    *acrapi.Server
	acrLn  net.Listener
	acrSrv *http.Server
	sntp   *sntpServer // nil: another NTP server answers on the host
	// cacheHosts are the cached images' registry hosts, mirrored to the
	// harness registry in the node file (cachedimages.go).
	cacheHosts []string
	// Images maps the harness image references to their digests.
	Images map[string]string
	// prealloc: the VMs' memory is allocated before they start
	// (qemu.Config.PreallocMemory); Bench sets it.
	prealloc bool
}

func (e *Env) logf(format string, args ...any) {
	if e.opts.Log != nil {
		fmt.Fprintf(e.opts.Log, "smoke: "+format+"\n", args...)
	}
}

// Start brings up the control plane, the registry with the harness images
// and the metadata emulator (hardened mode).
func Start(ctx context.Context, o Options) (*Env, error) { return StartECS(ctx, o, true) }

// StartECS brings up the metadata emulator and, with cluster, the control
// plane and the registry.
func StartECS(ctx context.Context, o Options, withCluster bool) (_ *Env, err error) {
	if o.Drover == "" {
		if o.Drover, err = os.Executable(); err != nil {
			return nil, err
		}
	}
	e := &Env{opts: o}
	defer func() {
		if err != nil {
			e.Close()
		}
	}()
	if withCluster {
		e.logf("starting the control plane (Kubernetes %s)", o.Version)
		cc := cluster.Config{StateDir: filepath.Join(o.WorkDir, "cluster"), CacheDir: o.CacheDir,
			Version: o.Version, BindAddress: "127.0.0.1", Log: o.Log}
		if e.kubeletFwd, err = freeLoopbackAddr(); err != nil {
			return nil, fmt.Errorf("kubelet forward: %w", err)
		}
		// No kube-scheduler unless the e2e suite runs: every pod of the
		// smoke names its node, and it would be one more process on a
		// loaded host.
		cc.Scheduler, cc.DialNode = o.Conformance, e.dialNode
		e.Cluster, err = cluster.Start(ctx, cc)
		if err != nil {
			return nil, fmt.Errorf("control plane: %w", err)
		}
		e.Registry, err = registry.Start(ctx, "127.0.0.1:0", nil)
		if err != nil {
			return nil, fmt.Errorf("registry: %w", err)
		}
		e.Images, err = registry.BuildAndPush(ctx, e.Registry, "go", o.WorkDir)
		if err != nil {
			return nil, fmt.Errorf("registry images: %w", err)
		}
		e.logf("control plane %s (guest: %s), registry %s", e.Cluster.Server(), e.Cluster.GuestServer(), e.Registry.Addr())
	}
	e.Metadata = ecsmeta.New(ECSInstance(), ecsmeta.Options{TokenEndpoint: true, TokenRequired: true})
	e.metaLn, err = net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return nil, err
	}
	go e.Metadata.Serve(e.metaLn)
	e.logf("ECS metadata emulator on %s, reached by the guest at %s", e.metaLn.Addr(), MetadataAddr)
	if withCluster {
		if err := e.startACR(ctx); err != nil {
			return nil, err
		}
	}
	if e.sntp, err = startSNTP(); err != nil {
		return nil, fmt.Errorf("SNTP server for the guest on %s: %w", sntpListen, err)
	}
	if e.sntp == nil {
		e.logf("%s is taken (an NTP server on this host): it answers the guest's timesyncd", sntpListen)
	}
	return e, nil
}

// ECSInstance is the emulated ECS instance: its network matches QEMU's.
func ECSInstance() ecsmeta.Instance {
	in := ecsmeta.DefaultInstance()
	in.PrivateIPv4, in.Gateway, in.Netmask = GuestIP, HostFromVM, "255.192.0.0"
	in.VSwitchCIDR = GuestNet
	in.Hostname = "izbp1drover0smoke0z"
	// The host (its SNTP server, ntp.go) comes first, so timesyncd really
	// synchronises during the run; the ECS name after it cannot resolve
	// here.
	in.NTPServers = []string{HostFromVM, "ntp.cloud.aliyuncs.com"}
	// The role whose STS credentials pull the private ACR image (acr.go).
	in.RAMRole = SmokeRAMRole
	return in
}

// GuestRegistry is the registry address as the guest reaches it.
func (e *Env) GuestRegistry() string {
	return fmt.Sprintf("%s:%d", HostFromVM, e.Registry.Port())
}

// mirrors are the node file's registry mirrors: the harness registry
// speaks plain http, and it is the mirror of the cached images' hosts.
func (e *Env) mirrors() map[string][]string {
	m := map[string][]string{e.GuestRegistry(): {"http://" + e.GuestRegistry()}}
	for _, h := range e.cacheHosts {
		m[h] = []string{"http://" + e.GuestRegistry()}
	}
	return m
}

// cniConfig is a single-node bridge network for the smoke test (a real
// cluster installs its CNI as a DaemonSet).
const cniConfig = `{
  "cniVersion": "1.0.0",
  "name": "drover-smoke",
  "plugins": [
    {"type": "bridge", "bridge": "cni0", "isGateway": true, "ipMasq": true,
     "ipam": {"type": "host-local", "ranges": [[{"subnet": "10.244.0.0/24"}]], "routes": [{"dst": "0.0.0.0/0"}]}},
    {"type": "portmap", "capabilities": {"portMappings": true}},
    {"type": "loopback"}
  ]
}
`

// UserData renders the launch template's user-data for this environment,
// exactly as `drover userdata` would.
func (e *Env) UserData() ([]byte, error) {
	spec, err := e.UserDataSpec()
	if err != nil {
		return nil, err
	}
	return userdata.Render(spec)
}

// UserDataSpec is the `drover userdata` settings (a pool file) UserData
// renders.
func (e *Env) UserDataSpec() (*userdata.Spec, error) {
	ca := filepath.Join(e.opts.WorkDir, "cluster-ca.crt")
	if err := os.WriteFile(ca, e.Cluster.CAPEM(), 0o644); err != nil {
		return nil, err
	}
	spec := &userdata.Spec{
		Server: e.Cluster.GuestServer(), CAFile: ca, BootstrapToken: e.Cluster.BootstrapToken(),
		Labels: map[string]string{"drover.dev/smoke": "true"},
		// Images are referenced at the harness registry itself; the
		// mirror entry tells containerd it speaks plain http.
		// The sandbox image is the default: the one the image ships.
		Mirrors: e.mirrors(),
		Files:   map[string]string{"/etc/cni/net.d/10-drover-smoke.conflist": cniConfig},
		// The harness registry is also an ACR Enterprise instance's
		// (custom) domain, whose private repositories need a login the
		// emulated ACR API issues for the instance's RAM role (acr.go);
		// the mirror above makes containerd pull it over plain http.
		ACR: e.acrSpec(),
		// A soft memory threshold the pressure check can cross without
		// starving the node (pressure.go); its grace period is longer than
		// the check holds it, so nothing is evicted for it. The pressure
		// condition's transition period is a minute, not the kubelet's
		// five: the check waits it out, on every smoke.
		KubeletConfig: map[string]any{
			"evictionSoft":                     map[string]any{"memory.available": pressureSoft},
			"evictionSoftGracePeriod":          map[string]any{"memory.available": "10m"},
			"evictionPressureTransitionPeriod": pressureTransition.String(),
		},
	}
	if e.opts.PinCA {
		pin, err := nodeconfig.CAHash(e.Cluster.CAPEM())
		if err != nil {
			return nil, err
		}
		spec.CAFile, spec.CAHash = "", pin
	}
	return spec, nil
}

// VMConfig is the QEMU configuration of one instance of image.
func (e *Env) VMConfig(image, stateDir string, nvme bool) *qemu.Config {
	return &qemu.Config{
		Image: image, StateDir: stateDir, NVMe: nvme, DiskSize: 8 << 30, MemoryMiB: 3072, PreallocMemory: e.prealloc,
		Net: GuestNet, Host: HostFromVM, DHCPStart: GuestIP,
		GuestFwd:    map[string]string{MetadataAddr: e.opts.Drover + " relay " + e.metaLn.Addr().String()},
		HostFwd:     e.hostFwd(),
		ProductName: "Alibaba Cloud ECS",
		Console:     e.opts.Console,
	}
}

// Close stops everything.
func (e *Env) Close() {
	e.sntp.Close()
	if e.acrSrv != nil {
		e.acrSrv.Close()
	}
	if e.metaLn != nil {
		e.Metadata.Close()
	}
	if e.Registry != nil {
		e.Registry.Close()
	}
	if e.Cluster != nil {
		e.Cluster.Stop()
	}
}

// hostFwd is the VM's host forwards: the kubelet port when there is a
// cluster, none otherwise.
func (e *Env) hostFwd() map[string]int {
	if e.kubeletFwd == "" {
		return nil
	}
	return map[string]int{e.kubeletFwd: KubeletPort}
}

// dialNode is the API server's way to the guest (cluster.NodeDialer): the
// guest's kubelet address, as its Node reports it, is the host forward;
// any other address is refused (the host has no route to the guest's
// network, and the API server must not reach anything else through it).
func (e *Env) dialNode(ctx context.Context, addr string) (net.Conn, error) {
	if addr != net.JoinHostPort(GuestIP, strconv.Itoa(KubeletPort)) {
		return nil, fmt.Errorf("%s is not the guest's kubelet (%s:%d): only the kubelet is forwarded", addr, GuestIP, KubeletPort)
	}
	var d net.Dialer
	return d.DialContext(ctx, "tcp", e.kubeletFwd)
}

// freeLoopbackAddr picks a free port on 127.0.0.1 for a QEMU host forward
// (QEMU binds it; the listener is closed first, the usual small race).
func freeLoopbackAddr() (string, error) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return "", err
	}
	defer ln.Close()
	return ln.Addr().String(), nil
}
