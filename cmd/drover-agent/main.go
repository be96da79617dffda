// Command drover-agent provisions a drover node once from its user-data,
// joins it to the cluster and then guards it against local change.
//
//	drover-agent run             provision (the systemd service runs this)
//	drover-agent status          print the boot timeline and state
//	drover-agent validate FILE   check an Ignition config exactly as run would
//	drover-agent apply FILE      refused: a node's configuration is immutable
package main

import (
	"context"
	"fmt"
	"maps"
	"os"
	"os/signal"
	"path/filepath"
	"strings"
	"syscall"

	"github.com/drover-os/drover/agent/agent"
	"github.com/drover-os/drover/agent/caps"
	"github.com/drover-os/drover/agent/containerd"
	"github.com/drover-os/drover/agent/credstatus"
	"github.com/drover-os/drover/agent/health"
	"github.com/drover-os/drover/agent/ignition"
	"github.com/drover-os/drover/agent/kube"
	"github.com/drover-os/drover/agent/network"
	"github.com/drover-os/drover/agent/nodeconfig"
	"github.com/drover-os/drover/agent/provider"
	"github.com/drover-os/drover/agent/status"
	"github.com/drover-os/drover/agent/storage"
	"github.com/drover-os/drover/agent/sysctlset"
	"github.com/drover-os/drover/agent/systemd"
	"github.com/drover-os/drover/internal/readahead"
)

const usage = `usage: drover-agent run | status | validate FILE | apply FILE

  run             provision this node from its user-data and join the cluster (run by drover-agent.service)
  status          print the provisioning timeline and state (/run/drover/status.json)
  validate FILE   check an Ignition config exactly as the agent would; exit 0 only if it would be accepted
  apply FILE      refused: configuration is immutable; replace the instance
`

func main() {
	if len(os.Args) < 2 {
		fmt.Fprint(os.Stderr, usage)
		os.Exit(2)
	}
	ctx, stop := signal.NotifyContext(context.Background(), syscall.SIGTERM, os.Interrupt)
	defer stop()
	var err error
	switch os.Args[1] {
	case "run":
		err = run(ctx)
	case "status":
		var s *status.Status
		if s, err = status.Read("/"); err == nil {
			fmt.Print(status.Format(s))
		}
	case "validate":
		if len(os.Args) != 3 {
			fmt.Fprint(os.Stderr, usage)
			os.Exit(2)
		}
		os.Exit(validate(ctx, os.Args[2]))
	case "apply":
		err = fmt.Errorf("%w: drover applies the user-data once, at first boot; build a new user-data and roll the launch template", agent.ErrImmutable)
	case "-h", "--help", "help":
		fmt.Print(usage)
		return
	default:
		fmt.Fprint(os.Stderr, usage)
		os.Exit(2)
	}
	if err != nil {
		fmt.Fprintf(os.Stderr, "drover-agent: %v\n", err)
		os.Exit(1)
	}
}

func validate(ctx context.Context, path string) int {
	data, err := os.ReadFile(path)
	if err != nil {
		fmt.Fprintf(os.Stderr, "drover-agent: %v\n", err)
		return 2
	}
	problems := ignition.Validate(data, agent.Options(&ignition.HTTPFetcher{}))
	for _, p := range problems {
		fmt.Println(p.String())
	}
	if len(problems) > 0 {
		return 1
	}
	fmt.Println("ok: the agent would accept this config")
	return 0
}

// console writes a line to stdout, which the unit sends to the journal and
// the serial console (what ECS GetInstanceConsoleOutput returns).
func console(s string) { fmt.Println(s) }

func run(ctx context.Context) error {
	mainAt := status.Uptime("/")()
	onCPU, waiting, schedErr := status.SchedStat("/")
	execAt, err := status.ProcessStart("/")
	if err != nil {
		console("drover-agent: start time unknown: " + err.Error())
	}
	if schedErr != nil {
		console("drover-agent: start-up CPU time unknown: " + schedErr.Error())
	}
	probes, err := provider.ReadProbes("/")
	if err != nil {
		return err
	}
	platform := provider.Detect(probes)
	ecs := &provider.ECSClient{Log: func(s string) { console("drover-agent: " + s) }}
	prov, err := provider.Open(platform, "/", probes, ecs)
	if err != nil {
		return err
	}
	// Dialed when a phase first needs systemd, not here: see systemd.Conn.
	sd := systemd.New()
	defer sd.Close()
	logf := func(format string, args ...any) { console("drover-agent: " + fmt.Sprintf(format, args...)) }
	env := agent.Env{
		Root: "/", Provider: prov, Systemd: sd, Fetcher: &ignition.HTTPFetcher{},
		// The data disks, for container storage (agent/storage).
		Storage: storage.Host{Root: "/"},
		Network: func(ctx context.Context, mac string) (agent.Primary, error) {
			p, err := network.Wait(ctx, network.WaitOptions{PreferredMAC: mac, Logf: logf})
			if err != nil {
				return agent.Primary{}, err
			}
			return agent.Primary{Link: p.Link, MAC: p.MAC, IPv4: p.IPv4.String(), Gateway: p.Gateway.String()}, nil
		},
		Prepare: func(hostname string) error {
			_, err := network.SetHostname("/", hostname, logf)
			return err
		},
		Kernel: func() error {
			if err := network.LoadModules("/", network.RequiredModules()...); err != nil {
				return err
			}
			// The kubelet runs with protectKernelDefaults: it refuses to
			// start unless these are already set.
			sysctls := network.Sysctls()
			maps.Copy(sysctls, nodeconfig.KubeletSysctls())
			// The security set (agent/sysctlset), where the kernel does not
			// hold it already: a stricter value it has (a one-way
			// unprivileged_bpf_disabled=1) is kept, not written over.
			// The guard reports any of them changed later.
			for k, v := range sysctlset.ToWrite(sysctlset.Check(agent.ProcSys("/"))) {
				if _, ok := sysctls[k]; !ok {
					sysctls[k] = v
				}
			}
			return network.ApplySysctls("/", sysctls, logf)
		},
		Healthz: func(ctx context.Context) error { return kube.Healthz(ctx, agent.HealthzURL) },
		// The node's guarantees are checked by their effect (agent/guarantee).
		Cmdline:      cmdline,
		KubeletPorts: kubeletPorts,
		Size:         instanceSize,
		// The sandbox image, imported through containerd's API (no ctr
		// in the image).
		Images: func(ctx context.Context, archive string, labels map[string]string) (containerd.Result, error) {
			return containerd.ImportArchive(ctx, containerd.Socket, containerd.CRINamespace, archive, labels)
		},
		// The image cache: layouts in the root or on the cache disk,
		// which the agent mounts read-only in its own namespace.
		ImportLayout:   agent.ImportLayout,
		KubeletVersion: agent.KubeletVersion,
		MountReadOnly: func(dev, dir, fstype string) error {
			return syscall.Mount(dev, dir, fstype, syscall.MS_RDONLY|syscall.MS_NOSUID|syscall.MS_NODEV|syscall.MS_NOEXEC, "")
		},
		PowerOff: systemd.PowerOff,
		Prefetch: func(paths ...string) { prefetch(paths, status.Uptime("/")) },
		Kube: func(server string, ca []byte, cert string) (agent.NodeAPI, error) {
			return kube.New(server, ca, cert, cert)
		},
		DiscoverCA: kube.DiscoverCA,
		Console:    console,
		Uptime:     status.Uptime("/"),
		Notify:     func(s string) { systemd.Notify(s) },
		Exec:       execAt,
		Main:       mainAt,
		StartCPU:   onCPU,
		StartWait:  waiting,
		// The ECS metadata service is reached over the primary NIC;
		// fw_cfg and a local file need no network.
		MetadataOverNetwork: platform == provider.PlatformECS,
	}
	a := agent.New(env, agent.DefaultDeadlines)
	console(fmt.Sprintf("drover-agent: platform %s (%s)", platform, prov.Name()))
	runErr := a.Run(ctx)
	switch {
	case runErr != nil && ctx.Err() != nil:
		return runErr // stopped (shutdown): nothing left to guard
	case runErr != nil:
		// A failed provisioning is not retried (the unit has Restart=no),
		// but what it applied, the accounts and the units are guarded all
		// the same. The failure is on the console and in the status file;
		// systemd is told the agent is up, so that the guard outlives
		// TimeoutStartSec, and why.
		console("drover-agent: " + runErr.Error())
		systemd.Notify("STATUS=failed: " + runErr.Error())
		systemd.Notify("READY=1")
	case a.Status().Snapshot().State == "unconfigured":
		return nil // no user-data: nothing was applied
	}
	// The guard starts no units; every signal systemd would go on sending
	// the open connection (each pod's scopes and mounts) would be decoded
	// for nothing.
	sd.Close()
	// The kernel's log is opened while the agent holds CAP_SYSLOG (the
	// check is at open(2); kernel.dmesg_restrict is 1): the open file
	// keeps reading once the capability is gone.
	kmsg, kmsgErr := os.Open("/dev/kmsg")
	// The guard needs none of provisioning's privileges: reading the
	// watched files (of any mode) and talking to the API server; and
	// CAP_SYS_BOOT, for logind to power the node off on a spot reclaim
	// notice (the image has no polkit to ask instead).
	if err := caps.Drop(caps.DACReadSearch, caps.SysBoot); err != nil {
		a.Status().Note("least privilege: could not drop capabilities before the drift guard: " + err.Error())
	} else {
		a.Status().Note("drift guard running with CAP_DAC_READ_SEARCH and CAP_SYS_BOOT only (all other capabilities dropped, bounding set included)")
	}
	if src, ok := prov.(agent.SpotSource); ok {
		go a.WatchSpot(ctx, src, agent.SpotPoll)
	}
	watch := agent.HealthSources{
		Links: func(ctx context.Context, update func(health.Link)) error {
			return network.WatchLinks(ctx, func(l network.Link, deleted bool) {
				update(health.Link{Index: l.Index, Name: l.Name, MAC: l.MAC, Watched: !network.Ignored(l),
					Up: l.Up, Carrier: l.Carrier, Deleted: deleted})
			})
		},
		Restarts:         systemd.ServiceRestarts,
		CredentialStatus: func() ([]byte, error) { return os.ReadFile(credstatus.Path) },
	}
	if kmsgErr != nil {
		a.Status().Note("kernel watch: " + kmsgErr.Error() + ": OOM kills, hung tasks and filesystem errors are not reported on the Node")
	} else {
		watch.Kmsg = kmsg
	}
	go a.WatchHealth(ctx, watch)
	a.Guard(ctx, agent.GuardPeriod)
	return nil // a failure was said when it happened
}

// prefetch reads paths to their end in the background, one after the
// other (readahead.Read: paced, so the service starting meanwhile does not
// queue its own page faults behind them), and says on the console what it
// read and how long that took once it is done. A file the image lacks is
// skipped.
func prefetch(paths []string, uptime func() float64) {
	go func() {
		t := uptime()
		var n int64
		var read []string
		for _, p := range paths {
			m, err := readahead.Read(p)
			n += m
			if err != nil {
				if !os.IsNotExist(err) {
					console("drover-agent: read-ahead: " + err.Error())
				}
				continue
			}
			read = append(read, filepath.Base(p))
		}
		console(fmt.Sprintf("drover-agent: read ahead: %s (%.0f MiB in %.1fs)", strings.Join(read, " "), float64(n)/(1<<20), uptime()-t))
	}()
}
