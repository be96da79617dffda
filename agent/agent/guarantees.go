package agent

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path"
	"strings"
	"sync"
	"syscall"
	"time"

	"github.com/drover-os/drover/agent/guarantee"
	"github.com/drover-os/drover/agent/nodeconfig"
	"github.com/drover-os/drover/agent/units"
)

// ContainerdConfig is the configuration file containerd must load: the
// one the agent renders.
const ContainerdConfig = "/etc/containerd/config.toml"

// ProtectedUnits are the units the node's guarantees rest on, and how each
// must resolve: the image's unit file, its command, its environment.
// Debian's containerd package installs containerd.service; the agent's
// units (agent/units) install the other two.
var ProtectedUnits = map[string]guarantee.UnitWant{
	"kubelet.service": {Fragment: units.Dir + "/kubelet.service", Exec: "/usr/bin/kubelet",
		EnvFiles: []string{nodeconfig.KubeletDefaultsPath}},
	"containerd.service":   {Fragment: units.Dir + "/containerd.service", Exec: "/usr/bin/containerd"},
	"drover-agent.service": {Fragment: units.Dir + "/drover-agent.service", Exec: "/usr/bin/drover-agent"},
}

// renderedFiles keeps what the agent rendered, by path, and when it had
// written it: what the running kubelet must have loaded, and the moment
// after which the file may not change (guarantee.Observation).
type renderedFiles struct {
	mu    sync.Mutex
	files map[string]rendered
}

type rendered struct {
	data []byte
	// at is the file's own change time, read back after the write: the
	// guarantee compares it with the file's ctime later, both stamped by
	// the kernel, so a clock step in between (timesyncd's at boot) cannot
	// make the write look like a later change. The agent's time.Now()
	// did: a step back after the write put the file 515 ms "after" it.
	at time.Time
}

func (r *renderedFiles) put(p string, data []byte, at time.Time) {
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.files == nil {
		r.files = map[string]rendered{}
	}
	r.files[p] = rendered{data, at}
}

func (r *renderedFiles) get(p string) ([]byte, bool) {
	r.mu.Lock()
	defer r.mu.Unlock()
	f, ok := r.files[p]
	return f.data, ok
}

// written maps every rendered path to when the agent had written it.
func (r *renderedFiles) written() map[string]time.Time {
	r.mu.Lock()
	defer r.mu.Unlock()
	out := make(map[string]time.Time, len(r.files))
	for p, f := range r.files {
		out[p] = f.at
	}
	return out
}

// expect is what the image and the applied config put on the node.
func (a *Agent) expect() guarantee.Expect {
	managed := map[string]bool{}
	for _, m := range a.managed {
		managed[m.Path] = true
	}
	e := guarantee.Expect{
		Units: ProtectedUnits,
		// The image's drop-ins are on the dm-verity /usr; the config's
		// were checked by the static policy before apply.
		DropIn:            func(p string) bool { return strings.HasPrefix(p, "/usr/") || managed[p] },
		KubeletConfigPath: nodeconfig.KubeletConfigPath,
		ContainerdConfig:  ContainerdConfig,
		Broken:            nodeconfig.BrokenKubeletInvariants,
	}
	if kc, ok := a.files.get(nodeconfig.KubeletConfigPath); ok {
		e.KubeletConfig = kc
	}
	e.Written = a.files.written()
	if d, ok := a.files.get(nodeconfig.KubeletDefaultsPath); ok {
		e.KubeletArgs = kubeletArgv(d)
	}
	return e
}

// kubeletArgv is the kubelet's argv from kubelet.service's
// `ExecStart=/usr/bin/kubelet $KUBELET_ARGS` and the rendered
// /etc/default/kubelet: systemd splits an unquoted $VAR at white space.
func kubeletArgv(defaults []byte) []string {
	line := strings.TrimSpace(string(defaults))
	v, ok := strings.CutPrefix(line, "KUBELET_ARGS=")
	if !ok {
		return nil
	}
	return append([]string{ProtectedUnits["kubelet.service"].Exec}, strings.Fields(strings.Trim(v, `"`))...)
}

// What a check observes: the units as systemd resolved them; with
// processes also the kubelet's and containerd's command lines and the
// kubelet's loaded configuration; with ports also the kubelet's answers.
const (
	seeUnits = iota
	seeProcesses
	seePorts
)

// observe gathers what the node shows, up to level.
func (a *Agent) observe(ctx context.Context, level int) (guarantee.Observation, error) {
	var o guarantee.Observation
	pids := map[string]uint32{}
	for n := range ProtectedUnits {
		r, err := a.env.Systemd.Resolve(ctx, n)
		if err != nil {
			return o, err
		}
		o.Units = append(o.Units, guarantee.Unit{Name: n, LoadState: r.LoadState, FragmentPath: r.FragmentPath,
			DropInPaths: r.DropInPaths, ExecStart: r.ExecStart, EnvironmentFiles: r.EnvironmentFiles, MainPID: r.MainPID})
		pids[n] = r.MainPID
	}
	if level < seeProcesses || a.env.Cmdline == nil {
		return o, nil
	}
	var err error
	if o.KubeletArgs, err = a.processArgs(pids["kubelet.service"]); err != nil {
		return o, fmt.Errorf("reading the kubelet's command line: %w", err)
	}
	if o.ContainerdArgs, err = a.processArgs(pids["containerd.service"]); err != nil {
		return o, fmt.Errorf("reading containerd's command line: %w", err)
	}
	// The configuration the kubelet loaded is the file its --config
	// names, whichever that is.
	cfg := nodeconfig.KubeletConfigPath
	for _, arg := range o.KubeletArgs {
		if v, ok := strings.CutPrefix(arg, "--config="); ok {
			cfg = v
		}
	}
	if o.KubeletConfig, err = os.ReadFile(a.path(cfg)); err != nil {
		o.KubeletConfig = []byte("unreadable: " + err.Error())
	}
	o.Changed = map[string]time.Time{}
	for p := range a.files.written() {
		if t := changeTime(a.path(p)); !t.IsZero() {
			o.Changed[p] = t
		}
	}
	if level >= seePorts && a.env.KubeletPorts != nil {
		api, ro := a.env.KubeletPorts(ctx)
		o.API, o.ReadOnly = &api, &ro
	}
	return o, nil
}

// processArgs reads a service's main process's argv. Right after its start
// job, systemd's main PID can still be systemd-executor setting up the
// sandbox, first under its own name, then renamed "(kubelet)" after the
// unit, before it execs the command; and a main process that has just
// exited shows no command line at all. Neither is the process to judge,
// and the caller looks again (a command line that never becomes one fails
// the phase at its deadline).
func (a *Agent) processArgs(pid uint32) ([]string, error) {
	argv, err := a.env.Cmdline(pid)
	if err != nil {
		return nil, err
	}
	if len(argv) == 0 {
		return nil, fmt.Errorf("process %d has no command line: it has exited (and systemd will restart it) or not yet started", pid)
	}
	if path.Base(argv[0]) == "systemd-executor" || strings.HasPrefix(argv[0], "(") {
		return nil, fmt.Errorf("process %d is %q, systemd's before the exec of the command", pid, strings.Join(argv, " "))
	}
	return argv, nil
}

// guarantees checks the node's guarantees by their effect; an error names
// each broken one and the file that changed it.
func (a *Agent) guarantees(ctx context.Context, level int) error {
	// A kubelet that restarted between reading its MainPID and its
	// /proc, or whose API port is not listening yet, is looked at again
	// (within observeFor); what it shows is judged at once.
	var o guarantee.Observation
	err := a.waitFor(ctx, "an observation of the node's guarantees", func() (bool, error) {
		var err error
		o, err = a.observe(ctx, level)
		if err == nil && o.API != nil && o.API.Status == 0 && time.Since(a.kubeletStart) < observeFor {
			err = fmt.Errorf("the kubelet's API port does not answer yet: %s", o.API.Err)
		}
		return err == nil, err
	})
	if err != nil {
		return fmt.Errorf("observing the node's guarantees: %w", err)
	}
	if v := guarantee.Check(o, a.expect()); len(v) > 0 {
		return ViolationError(v)
	}
	return nil
}

// observeFor bounds how long after its start the kubelet's API port may
// not answer yet; later, no answer is a broken guarantee.
const observeFor = time.Minute

// ViolationError is the error of a phase whose guarantee check failed.
type ViolationError []guarantee.Violation

func (v ViolationError) Error() string {
	parts := make([]string, len(v))
	for i, x := range v {
		parts[i] = x.String()
	}
	return "GUARANTEE BROKEN: " + strings.Join(parts, "; ") + " — the node does not join; remove what changed it from the user-data and replace the instance"
}

// stopKubelet stops a kubelet that breaks the node's guarantees, so that it
// neither registers nor serves, and redacts the bootstrap token from what
// the node keeps: a node that does not join is replaced, and needs no
// credential to join with. It returns why.
func (a *Agent) stopKubelet(why error) error {
	// The guard, which runs after a failed join too, reports them on the
	// Node where the kubelet's credentials allow (a later boot): the
	// stopped kubelet makes the Node NotReady, and the node lifecycle
	// controller taints it; DroverConfigDrift and its Event say why.
	var v ViolationError
	if errors.As(why, &v) {
		for _, x := range v {
			a.known.add(violationDrift(x))
		}
	}
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	if err := a.env.Systemd.Stop(ctx, "kubelet.service"); err != nil {
		return fmt.Errorf("%w; stopping the kubelet failed too: %v", why, err)
	}
	if _, err := a.redactSecrets(); err != nil {
		return fmt.Errorf("%w (kubelet.service stopped; redacting the bootstrap token failed: %v)", why, err)
	}
	return fmt.Errorf("%w (kubelet.service stopped, bootstrap token redacted)", why)
}

// guaranteeDrift is the guard's round of the checks by effect: the host's
// (hostDrift) every round; the kubelet's guarantees once the kubelet
// passed them at its start, with the agent's own unit: each broken
// guarantee becomes a drift line naming the file that changed it (or the
// unit, when that cannot be told), reported on the Node like any other
// drift. An observation that fails (systemd busy, the kubelet
// restarting) is noted once and skipped.
func (a *Agent) guaranteeDrift() []Drift {
	out := a.hostDrift()
	if !a.kubeletChecked.Load() {
		return out
	}
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	o, err := a.observe(ctx, seePorts)
	// The guard holds no systemd connection between rounds (see
	// systemd.Conn): every signal of every unit would reach it.
	a.env.Systemd.Close()
	if err != nil {
		if a.observeErr.Swap(true) == false {
			a.rec.Note("drift guard: could not observe the node's guarantees (" + err.Error() + "); retrying every round")
		}
		return out
	}
	a.observeErr.Store(false)
	// A port probe that timed out judges nothing: seen on a node under
	// memory pressure, whose loopback connect to the read-only port timed
	// out and was reported as drift. The next round asks again. (At the
	// kubelet's start no answer is not excused: observeFor.)
	for _, p := range []**guarantee.Probe{&o.API, &o.ReadOnly} {
		if *p != nil && (*p).Timeout {
			*p = nil
		}
	}
	o.AgentCgroup = a.agentCgroup()
	e := a.expect()
	e.AgentPID = a.agentPID()
	for _, v := range guarantee.Check(o, e) {
		out = append(out, violationDrift(v))
	}
	return out
}

// violationDrift is a broken guarantee as a drift line: the file that
// broke it (or the unit, when that cannot be told) and the invariant.
func violationDrift(v guarantee.Violation) Drift {
	p := v.Source
	if p == "" {
		p = "kubelet.service"
	}
	return Drift{Path: p, What: "guarantee: " + v.Invariant, Want: "held", Got: v.Got}
}

// changeTime is a file's ctime; zero when it cannot be read (a file the
// agent deleted on purpose, the bootstrap kubeconfig; the drift guard
// reports one missing otherwise).
func changeTime(p string) time.Time {
	fi, err := os.Stat(p)
	if err != nil {
		return time.Time{}
	}
	st, ok := fi.Sys().(*syscall.Stat_t)
	if !ok {
		return time.Time{}
	}
	return time.Unix(st.Ctim.Sec, st.Ctim.Nsec)
}
