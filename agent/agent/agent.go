// Package agent is drover-agent's state machine: config → apply → network
// → runtime → kubelet → certificate → ready → cleanup, then guard. Each
// phase has a deadline, a console line and an entry in the status file.
// Everything that touches the node goes through Env, so the whole run is
// tested against fakes and a temporary root.
package agent

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"sync"
	"sync/atomic"
	"time"

	"github.com/drover-os/drover/agent/boot"
	"github.com/drover-os/drover/agent/containerd"
	"github.com/drover-os/drover/agent/guarantee"
	"github.com/drover-os/drover/agent/health"
	"github.com/drover-os/drover/agent/ignition"
	"github.com/drover-os/drover/agent/kube"
	"github.com/drover-os/drover/agent/nodeconfig"
	"github.com/drover-os/drover/agent/provider"
	"github.com/drover-os/drover/agent/status"
	"github.com/drover-os/drover/agent/storage"
	"github.com/drover-os/drover/agent/systemd"
)

// Where the agent keeps its state on the node (under Env.Root).
const (
	StateDir     = "/var/lib/drover"
	StoredConfig = StateDir + "/config.ign"
	StoredDigest = StateDir + "/config.sha256"
	ManagedFile  = "/run/drover/managed.json"
	NodeFile     = nodeconfig.Path
	KubeletCert  = "/var/lib/kubelet/pki/kubelet-client-current.pem"
	HealthzURL   = "http://127.0.0.1:10248/healthz"
)

// ContentsDir keeps the config's remote contents, by verification hash, so
// that they are fetched on the first boot only.
const ContentsDir = StateDir + "/contents"

// ErrImmutable is reported when the user-data differs from the config the
// instance was provisioned with.
var ErrImmutable = errors.New("configuration is immutable; replace the instance")

// Primary is the node's primary network interface as the network phase found it.
type Primary struct {
	Link    string
	MAC     string
	IPv4    string
	Gateway string
}

// NodeAPI is what the agent asks the API server, with the kubelet's own credentials.
type NodeAPI interface {
	GetNode(ctx context.Context, name string) (*kube.Node, error)
	SetCondition(ctx context.Context, name string, c kube.Condition) error
	Cordon(ctx context.Context, name string) error
	Event(ctx context.Context, node, uid, reason, message string) error
}

// Env is everything the agent touches; main wires the real ones.
type Env struct {
	Root     string
	Provider provider.Provider
	Systemd  systemd.Manager
	Fetcher  ignition.Fetcher
	// Network waits for the primary interface (bounded by ctx).
	Network func(ctx context.Context, preferMAC string) (Primary, error)
	// Prepare sets the hostname.
	Prepare func(hostname string) error
	// Kernel loads the kernel prerequisites of the node (modules, then
	// sysctls); nil: nothing to do. It depends on nothing from the
	// user-data, so it runs from the start, beside config.
	Kernel  func() error
	Healthz func(ctx context.Context) error
	// Cmdline reads a process's argv (/proc/<pid>/cmdline); KubeletPorts
	// asks the kubelet's API port (10250) and read-only port (10255)
	// without credentials. The guarantee checks use them; nil: not
	// observed (tests that do not judge them).
	Cmdline      func(pid uint32) ([]string, error)
	KubeletPorts func(ctx context.Context) (api, readOnly guarantee.Probe)
	// Size reads the instance's online CPUs and MemTotal, from which the
	// kubelet's reservations are computed (nodeconfig.Reserve); nil or an
	// error: none are set, and the runtime phase says so.
	Size func() (cpus int, memTotal uint64, err error)
	// PowerOff asks logind to power the node off, which the kubelet's
	// graceful node shutdown holds back until its pods have stopped (the
	// spot watch); nil: never.
	PowerOff func(ctx context.Context) error
	// Images imports the OCI layout archive at the path into containerd's
	// CRI namespace, with the labels on every image it names
	// (containerd.ImportArchive on containerd's socket); nil: the sandbox
	// image is not imported (tests that do not judge it). See
	// importSandbox.
	Images func(ctx context.Context, archive string, labels map[string]string) (containerd.Result, error)
	// ImportLayout imports an OCI image layout directory the same way
	// (the image cache, imagecache.go); MountReadOnly mounts a file system
	// of type fstype read-only (the cache disk); nil: no image cache.
	ImportLayout  func(ctx context.Context, dir string, labels map[string]string) (containerd.Result, error)
	MountReadOnly func(dev, dir, fstype string) error
	// KubeletVersion is the Kubernetes version the kubelet binary was
	// built from (v1.37.2), which decides what its configuration may say
	// (nodeconfig.Facts.KubeletVersion); nil or an error: not known.
	KubeletVersion func() (string, error)
	// Prefetch starts reading files into the page cache in the
	// background and returns at once (nil: nothing is read ahead); see
	// KubeletBinaries.
	Prefetch func(paths ...string)
	// Kube builds the API client once the kubelet has its certificate.
	Kube func(server string, ca []byte, certFile string) (NodeAPI, error)
	// Storage observes the data disks and formats the one used (the
	// storage phase); nil: no storage phase, container storage stays
	// where it is (tests that do not judge it).
	Storage storage.System
	// DiscoverCA finds the cluster CA a node file pins by hash only
	// (kube.DiscoverCA: signed cluster-info, the pinned certificate
	// alone); called on the first boot only, see ClusterCA.
	DiscoverCA func(ctx context.Context, server, token, pin string) ([]byte, error)
	Console    func(string)
	Uptime     func() float64
	Notify     func(string)
	// Exec and Main are when the agent's process was exec'd and when its
	// main began, in seconds since boot (0: unknown). Run records them as
	// the "start" phase: the start-up before the first phase (page-in of
	// the binary through dm-verity, Go runtime and package init, the
	// platform probe and the systemd connection).
	Exec, Main float64
	// StartCPU and StartWait split Main-Exec: how long the process ran on
	// a CPU and how long it waited for one (status.SchedStat; 0: unknown).
	StartCPU, StartWait float64
	Poll                time.Duration // how often waits re-check (default 250ms)
	// MetadataOverNetwork says the provider is reached over the network
	// (ECS metadata): the config phase waits for a default route first,
	// rather than spending its first requests, and backoff, on an
	// interface DHCP has not configured yet.
	MetadataOverNetwork bool
}

// Deadlines per phase.
type Deadlines struct {
	Config, Apply, Network, Runtime, Kubelet, Certificate, Ready time.Duration
	// Units bounds the wait for the config's own enabled units.
	Units time.Duration
}

// DefaultDeadlines are generous for software-emulated test VMs and real ECS alike.
var DefaultDeadlines = Deadlines{Config: 5 * time.Minute, Apply: time.Minute, Network: 3 * time.Minute,
	Runtime: 3 * time.Minute, Kubelet: 5 * time.Minute, Certificate: 10 * time.Minute, Ready: 15 * time.Minute,
	Units: 10 * time.Minute}

// DefaultPoll is how often the agent re-checks what it waits for (kubelet
// healthz, its certificate, the Node's Ready condition): each check is a
// local file or HTTP request, and a coarse interval adds its whole length
// to the join at every wait.
const DefaultPoll = 250 * time.Millisecond

// Agent runs one provisioning.
type Agent struct {
	env  Env
	dl   Deadlines
	rec  *status.Recorder
	node *nodeconfig.Config
	// results carried between phases
	userData []byte
	// fromStore: userData is the redacted form of the user-data (the
	// stored config, confirmed against it), whose node file carries a
	// redacted token.
	fromStore bool
	// restore: the stored config was gone or not the user-data's; apply
	// writes it again from userData.
	restore bool
	// launchedWith is the digest of the user-data as the metadata gave
	// it this boot (StoredDigest records it).
	launchedWith string
	// known is drift found once (a tampered stored config), which the
	// guard reports beside what it checks.
	known knownDrift
	// kubeletChecked: the kubelet passed the guarantee checks at its
	// start, so the guard checks them too. observeErr: the guard's last
	// observation failed (said once).
	kubeletChecked, observeErr atomic.Bool
	facts                      provider.Facts
	// secureBoot is drover-init's finding: "true", "false" or "" (unknown).
	secureBoot string
	primary    Primary
	managed    []ignition.Managed
	// watch is what the guard checks: the config's paths and the files
	// the agent renders, as the agent left them.
	watch watchList
	// files is what the agent rendered, by path: what the guarantee
	// checks expect the kubelet to have loaded.
	files renderedFiles
	// start is the config's enabled units, started by the units phase.
	start    []string
	nodeName string
	// kubeletStart is when the kubelet phase started the kubelet: the
	// Node's Ready condition counts only if posted after it.
	kubeletStart time.Time
	// The results of the background phases (sequence says which phase
	// starts each, and what runs beside it): kernel, containerd, time,
	// sandbox. units has no reader: a failed user unit does not stop
	// the join.
	containerd, kernel, timeDone, sandbox, units chan error
	// imageCacheDone has no reader either: the phase only starts the
	// image cache's import, which never holds up the join.
	imageCacheDone chan error
	// rendered is closed once runtime has written the node's
	// configuration (timesyncd's drop-in among it).
	rendered chan struct{}
	// events are Warning Events on the Node found before the join (a data
	// disk not used), delivered with the kernel watch's.
	events []pendingReport
	// imageReports are the image cache's condition and Event, delivered
	// with the kernel watch's (buffered: the import may end before it
	// starts).
	imageReports chan health.Finding
	// bg counts the background phases, which Run waits for.
	bg sync.WaitGroup
}

// New returns an agent over env.
func New(env Env, dl Deadlines) *Agent {
	if env.Poll == 0 {
		env.Poll = DefaultPoll
	}
	if env.Notify == nil {
		env.Notify = func(string) {}
	}
	return &Agent{env: env, dl: dl, rec: status.NewRecorder(env.Root, env.Console, env.Uptime), imageReports: make(chan health.Finding, 8)}
}

// Status returns the recorder (for the guard and tests).
func (a *Agent) Status() *status.Recorder { return a.rec }

func (a *Agent) path(p string) string { return filepath.Join(a.env.Root, p) }

// phase runs fn under a deadline, recording it.
func (a *Agent) phase(ctx context.Context, name string, d time.Duration, fn func(ctx context.Context) (string, error)) error {
	return a.begin(name)(ctx, d, fn)
}

// begin records the start of a phase now and returns the function that
// runs and finishes it. A background phase is begun before its goroutine
// starts, so the status file and the console show it starting where the
// agent started it, however late the goroutine is scheduled.
func (a *Agent) begin(name string) func(context.Context, time.Duration, func(ctx context.Context) (string, error)) error {
	i := a.rec.Begin(name)
	return func(ctx context.Context, d time.Duration, fn func(ctx context.Context) (string, error)) error {
		return a.runPhase(ctx, i, name, d, fn)
	}
}

// background begins phase name now and runs it beside the agent's
// sequence; its result arrives on the returned channel. Run waits for
// every background phase before it returns.
func (a *Agent) background(ctx context.Context, name string, d time.Duration, fn func(context.Context) (string, error)) chan error {
	done := make(chan error, 1)
	run := a.begin(name)
	a.bg.Go(func() { done <- run(ctx, d, fn) })
	return done
}

func (a *Agent) runPhase(ctx context.Context, i int, name string, d time.Duration, fn func(ctx context.Context) (string, error)) error {
	a.env.Notify("STATUS=" + name)
	pctx, cancel := context.WithTimeout(ctx, d)
	defer cancel()
	detail, err := fn(pctx)
	if err != nil && pctx.Err() != nil && ctx.Err() == nil {
		err = fmt.Errorf("%w (phase deadline %s)", err, d)
	}
	a.rec.Finish(i, detail, err)
	return err
}

// Run provisions the node and returns once it is Ready (or failed).
func (a *Agent) Run(ctx context.Context) error {
	if a.env.Exec > 0 {
		split := ""
		if a.env.StartCPU > 0 {
			split = fmt.Sprintf(": %.2fs on a CPU, %.2fs waiting for one, %.2fs blocked", a.env.StartCPU, a.env.StartWait,
				max(0, a.env.Main-a.env.Exec-a.env.StartCPU-a.env.StartWait))
		}
		a.rec.Span("start", a.env.Exec, fmt.Sprintf("exec at %.2fs, main at %.2fs (sandbox, runtime and package init %.2fs%s), then platform probe and systemd connection %.2fs",
			a.env.Exec, a.env.Main, a.env.Main-a.env.Exec, split, a.env.Uptime()-a.env.Main))
	}
	a.readSecureBoot()
	// Background phases finish before Run returns, so a failure elsewhere
	// never leaves them half-recorded in the status file; on a failure
	// they are cancelled first, so the failure is not held up by a wait
	// (for the network, containerd) that no longer matters.
	ctx, cancel := context.WithCancel(ctx)
	defer func() { a.bg.Wait(); cancel() }()
	a.rendered = make(chan struct{})
	first, steps := a.sequence()
	a.startBeside(ctx, first)
	for _, s := range steps {
		err := a.phase(ctx, s.name, s.d, s.fn)
		if errors.Is(err, errNoConfig) {
			a.rec.SetState("unconfigured", err.Error())
			a.env.Notify("READY=1")
			return nil
		}
		if err != nil {
			cancel()
			return err
		}
		a.startBeside(ctx, s.then)
		if s.ready {
			// The node's configuration is in place: boot may go on while
			// the join proceeds (STATUS= tells each phase).
			a.env.Notify("READY=1")
		}
	}
	if err := await(ctx, a.timeDone, "the clock (systemd-timesyncd, started beside the kubelet)"); err != nil {
		cancel()
		return err
	}
	a.rec.SetState("joined", a.snapshotError())
	a.env.Notify("STATUS=joined")
	return nil
}

// readSecureBoot takes over what drover-init found about Secure Boot, for
// the status file and the Node label.
func (a *Agent) readSecureBoot() {
	sb, err := boot.ReadSecureBoot(a.env.Root)
	if err != nil {
		a.rec.Note("secure boot unknown: " + err.Error())
		return
	}
	if sb == nil {
		return // drover-init did not record it
	}
	a.rec.SetSecureBoot(sb.State, sb.Source, sb.SignedUKI)
	if sb.State == boot.SecureBootOn || sb.State == boot.SecureBootOff {
		a.secureBoot = strconv.FormatBool(sb.Enabled)
	}
}

func (a *Agent) snapshotError() string { return a.rec.Snapshot().Error }

var errNoConfig = errors.New("no user-data: the node stays unconfigured (give the instance an Ignition config as UserData)")

func digest(b []byte) string {
	s := sha256.Sum256(b)
	return hex.EncodeToString(s[:])
}

// waitFor polls check until it returns true or ctx ends.
func (a *Agent) waitFor(ctx context.Context, what string, check func() (bool, error)) error {
	var last error
	for {
		ok, err := check()
		if ok {
			return nil
		}
		last = err
		select {
		case <-ctx.Done():
			if last != nil {
				return fmt.Errorf("waiting for %s: %w (last: %v)", what, ctx.Err(), last)
			}
			return fmt.Errorf("waiting for %s: %w", what, ctx.Err())
		case <-time.After(a.env.Poll):
		}
	}
}

func fileExists(p string) bool {
	_, err := os.Stat(p)
	return err == nil
}
