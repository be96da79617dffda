package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"os/user"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/spf13/cobra"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/tools/clientcmd"

	"github.com/drover-os/drover/agent/userdata"
	"github.com/drover-os/drover/cloud/aliyun"
	"github.com/drover-os/drover/cloud/event"
	"github.com/drover-os/drover/nodecontract"
	"github.com/drover-os/drover/rollout"
)

type rolloutFlags struct {
	group, image, userData, kubeconfig, region string
	ecsEndpoint, essEndpoint                   string
	maxUnavailable, surge, maxUnhealthy        string
	readyTimeout, drainTimeout, after, poll    time.Duration
	minReady                                   time.Duration
	lockTTL                                    time.Duration
	resume, dryRun, asJSON, repair, keep       bool
	breakLock, force, pauseAfterFirst          bool
}

func newRolloutCmd(g *globals) *cobra.Command {
	var f rolloutFlags
	cmd := &cobra.Command{
		Use:   "rollout --scaling-group ID --image ID|MANIFEST --userdata pool.yaml",
		Short: "Replace a scaling group's nodes with a new image or node config, gated on the new Nodes being Ready",
		Long: `rollout makes an ESS scaling group's instances run an image and a node
configuration (the user-data, bootstrap token excluded), one batch at a time:
it creates a launch template version (image, user-data, the description
"drover build=… config=… image=… size=… max=…"), points the group at it, then
for each old instance launches a new one (--surge), waits until its Node is
Ready with the image's build ID and the node-config digest as labels
(--ready-timeout), cordons and drains an old Node through the Eviction API
(PodDisruptionBudgets respected, --drain-timeout) and removes its instance.
An old instance leaves only once a Ready replacement is counted for it.
A template at ECS's 30 versions first loses the oldest version drover made
that nothing uses (never the default, the group's, an instance's, or one
drover did not make).

A group already there prints "nothing to do". A rotated bootstrap token only
makes a new version: no instance is replaced. A new Node not Ready in time
stops the rollout (exit 1) with the instance's console output and the Node's
conditions and Events; the failed instance is removed (--keep-failed leaves
it) and the group launches from its previous version again. An interrupted
rollout continues with --resume, from the group's state alone.

Instances in Standby or Protected, and instances attached to the group by
hand, count in its size and are left alone (listed as skipped). A group
without a desired capacity is refused. A rollout or repair locks the group
with a tag (drover:lock:<run>, renewed while it runs, removed at the end):
another run on a locked group is refused, naming the holder and until when;
--break-lock removes the lock of a run that is dead. A MaxSize raised for the
surge is recorded on the group (tag drover:surge) and restored at the end, on
a stop when no surge instance is left above it, or by the next run.

--image is an image ID (m-…) or a manifest or image file: the image tagged
drover:build-id=<the manifest's buildID> by drover publish. --userdata is the
pool's YAML (drover userdata --from) or an Ignition file used as is.

--repair replaces instead the instances whose Node has been NotReady, or
carried one of the agent's unhealthy conditions (ReadonlyFilesystem,
DroverConfigDrift, NICLinkDown, FrequentContainerdRestart,
FrequentKubeletRestart), longer than --after: one at a time, drained first
when the Node is still Ready, the group launching the replacement.

Credentials come from the standard chain (ALIBABA_CLOUD_ACCESS_KEY_ID/_SECRET,
~/.aliyun/config.json, the instance's RAM role); the cluster from --kubeconfig,
$KUBECONFIG, ~/.kube/config or the pod's service account. See docs/rollout.md.`,
		Example: `  drover rollout --region cn-hangzhou --scaling-group asg-xxx --image out/ecs-node.manifest.json --userdata pool.yaml --dry-run
  drover rollout --region cn-hangzhou --scaling-group asg-xxx --image m-xxx --userdata pool.yaml --json
  drover rollout --region cn-hangzhou --scaling-group asg-xxx --resume
  drover rollout --region cn-hangzhou --scaling-group asg-xxx --repair --after 10m`,
		Args: usageArgs(cobra.NoArgs),
		RunE: func(cmd *cobra.Command, _ []string) error {
			return runRollout(cmd.Context(), &f, cmd.OutOrStdout(), g.log())
		},
	}
	fl := cmd.Flags()
	fl.StringVar(&f.group, "scaling-group", "", "ESS scaling group ID (required)")
	fl.StringVar(&f.image, "image", "", "image ID (m-…), or a manifest/image file whose build ID names the published image")
	fl.StringVar(&f.userData, "userdata", "", "the pool's user-data: a YAML spec (as drover userdata --from) or an Ignition JSON file")
	fl.StringVar(&f.kubeconfig, "kubeconfig", "", "kubeconfig of the cluster (default $KUBECONFIG, ~/.kube/config, else in-cluster)")
	fl.StringVar(&f.region, "region", os.Getenv("ALIBABA_CLOUD_REGION_ID"), "region ID (default $ALIBABA_CLOUD_REGION_ID)")
	fl.StringVar(&f.maxUnavailable, "max-unavailable", "1", "old Nodes drained at once (repair: Nodes unavailable at once): a number, or a percentage of the group's size rounded down (at least 1)")
	fl.StringVar(&f.surge, "surge", "1", "instances launched above the group's size at once: a number, or a percentage of the group's size rounded up")
	fl.DurationVar(&f.readyTimeout, "ready-timeout", 15*time.Minute, "how long a new instance has to become a Ready Node")
	fl.DurationVar(&f.minReady, "min-ready", 0, "soak: a new Node counts as Ready only once it has been Ready this long (within --ready-timeout), so one that fails soon after joining stops the rollout before an old Node goes")
	fl.DurationVar(&f.drainTimeout, "drain-timeout", 10*time.Minute, "how long one Node's drain may take (evictions a PodDisruptionBudget refuses are retried)")
	fl.BoolVar(&f.resume, "resume", false, "continue a rollout in flight (without --image/--userdata: to the version the group launches from)")
	fl.BoolVar(&f.dryRun, "dry-run", false, "print the plan; call nothing that writes")
	fl.BoolVar(&f.asJSON, "json", false, "print one JSON event per line on stdout, as drover publish --json does (docs/events.md)")
	fl.BoolVar(&f.keep, "keep-failed", false, "leave a new instance that did not become Ready in the group, for inspection")
	fl.BoolVar(&f.repair, "repair", false, "replace the instances whose Node is NotReady or unhealthy for longer than --after")
	fl.StringVar(&f.maxUnhealthy, "max-unhealthy", "", "with --repair: replace nothing when more Nodes than this are unhealthy, a number or a percentage of the judged ones (a cluster-wide problem is not fixed by replacing nodes); default: no limit")
	fl.DurationVar(&f.after, "after", 10*time.Minute, "with --repair: how long a Node must have been NotReady or unhealthy")
	fl.StringVar(&f.ecsEndpoint, "ecs-endpoint", "", "ECS API endpoint (default $DROVER_ECS_ENDPOINT, else the region's)")
	fl.StringVar(&f.essEndpoint, "ess-endpoint", "", "ESS API endpoint (default $DROVER_ESS_ENDPOINT, else the region's)")
	fl.DurationVar(&f.poll, "poll-interval", 10*time.Second, "pause between two looks at the group and the cluster")
	fl.BoolVar(&f.pauseAfterFirst, "pause-after-first", false, "stop (exit 0) once the first batch of old instances is replaced, for a pipeline to check the new Nodes; go on with --resume")
	fl.BoolVar(&f.force, "force", false, "drain Nodes that run pods no controller owns (bare pods) too: evicted, they are gone for good")
	fl.BoolVar(&f.breakLock, "break-lock", false, "remove another run's lock on the group first: only when that run is dead (killed, its runner gone)")
	fl.DurationVar(&f.lockTTL, "lock-ttl", rollout.DefaultLockTTL, "how long the group's lock lasts unrenewed")
	for _, h := range []string{"ecs-endpoint", "ess-endpoint", "poll-interval", "lock-ttl"} {
		_ = fl.MarkHidden(h)
	}
	cmd.SetFlagErrorFunc(func(_ *cobra.Command, err error) error { return &exitError{code: 2, err: err} })
	return cmd
}

func usage(format string, a ...any) error {
	return &exitError{code: 2, err: fmt.Errorf(format+" (see drover rollout --help)", a...)}
}

func runRollout(ctx context.Context, f *rolloutFlags, stdout, log io.Writer) error {
	switch {
	case f.group == "":
		return usage("--scaling-group is required")
	case f.repair && (f.image != "" || f.userData != "" || f.resume):
		return usage("--repair takes no --image, --userdata or --resume: it replaces unhealthy instances from the group's own version")
	case !f.repair && !f.resume && (f.image == "" || f.userData == ""):
		return usage("--image and --userdata are required (or --resume, --repair)")
	case !f.repair && (f.image == "") != (f.userData == ""):
		return usage("pass both --image and --userdata, or neither with --resume")
	case f.poll <= 0:
		return usage("--poll-interval must be positive")
	case f.minReady < 0 || (f.minReady > 0 && f.minReady >= f.readyTimeout):
		return usage("--min-ready %s must be below --ready-timeout %s: the soak counts within it", f.minReady, f.readyTimeout)
	case f.lockTTL < 3*time.Second:
		return usage("--lock-ttl must be at least 3s")
	}
	o := rollout.Options{PauseAfterFirst: f.pauseAfterFirst}
	var err error
	if o.MaxUnavailable, o.MaxUnavailablePercent, err = countOrPercent("--max-unavailable", f.maxUnavailable); err != nil {
		return err
	}
	if o.Surge, o.SurgePercent, err = countOrPercent("--surge", f.surge); err != nil {
		return err
	}
	if f.maxUnhealthy != "" {
		if !f.repair {
			return usage("--max-unhealthy is for --repair")
		}
		if o.MaxUnhealthy, o.MaxUnhealthyPercent, err = countOrPercent("--max-unhealthy", f.maxUnhealthy); err != nil {
			return err
		}
	}
	if err := o.Check(); err != nil && !f.repair {
		return usage("%v", err)
	}
	clients, err := aliyun.New(aliyun.Options{Region: f.region, ECSEndpoint: f.ecsEndpoint, ESSEndpoint: f.essEndpoint})
	if err != nil {
		return usage("%v", err)
	}
	kc, err := kubeClient(f.kubeconfig)
	if err != nil {
		return err
	}
	cloud := rollout.NewAliyun(clients)
	cloud.ActivityWait = min(f.poll, cloud.ActivityWait)
	env := &rollout.Env{Cloud: cloud, Cluster: &rollout.Kube{Client: kc, Poll: min(f.poll, 5*time.Second), Force: f.force}, Region: clients.Region,
		Event: eventPrinter(f.asJSON, stdout, log), Poll: f.poll, ReadyTimeout: f.readyTimeout, DrainTimeout: f.drainTimeout, MinReady: f.minReady,
		KeepFailed: f.keep, DryRun: f.dryRun, Owner: lockOwner(), RunID: rollout.NewRunID(), LockTTL: f.lockTTL, BreakLock: f.breakLock}
	if f.repair {
		return env.Repair(ctx, f.group, f.after, o)
	}
	var d rollout.Desired
	if f.image == "" {
		d, err = desiredFromGroup(ctx, env, f.group)
	} else {
		d, err = desiredFromFlags(ctx, cloud, f.image, f.userData)
	}
	if err != nil {
		return err
	}
	err = env.Run(ctx, f.group, d, o, f.resume)
	var nr *rollout.NotReadyError
	if errors.As(err, &nr) {
		// The report went out as a "failed" event; the error is the summary.
		return &exitError{code: 1, err: err}
	}
	return err
}

// desiredFromFlags reads the user-data and finds the image.
func desiredFromFlags(ctx context.Context, cloud *rollout.Aliyun, image, udPath string) (rollout.Desired, error) {
	ud, err := loadUserData(udPath)
	if err != nil {
		return rollout.Desired{}, err
	}
	digest, err := nodecontract.ConfigDigest(ud)
	if err != nil {
		return rollout.Desired{}, fmt.Errorf("--userdata %s: %w", udPath, err)
	}
	d := rollout.Desired{Config: digest, UserData: ud}
	if _, statErr := os.Stat(image); strings.HasPrefix(image, "m-") && statErr != nil {
		d.ImageID = image
		if d.BuildID, err = cloud.ImageBuildID(ctx, image); err != nil {
			return d, err
		}
		return d, nil
	}
	m, p, err := loadManifestFor(image)
	if err != nil {
		return d, fmt.Errorf("--image %s: not an image ID (m-…) and %w", image, err)
	}
	if m.BuildID == "" {
		return d, fmt.Errorf("--image %s: manifest %s has no buildID", image, p)
	}
	d.BuildID = m.BuildID
	d.ImageID, err = cloud.ImageByBuildID(ctx, m.BuildID)
	return d, err
}

// loadUserData is an Ignition file as is, or a pool spec rendered.
func loadUserData(p string) ([]byte, error) {
	data, err := os.ReadFile(p)
	if err != nil {
		return nil, fmt.Errorf("reading --userdata: %w", err)
	}
	if strings.HasPrefix(strings.TrimSpace(string(data)), "{") {
		return data, nil
	}
	s, err := userdata.Load(p)
	if err != nil {
		return nil, fmt.Errorf("--userdata %s: neither Ignition JSON nor a pool spec: %w", p, err)
	}
	// A path in the file is relative to the file.
	if s.CAFile != "" && !filepath.IsAbs(s.CAFile) {
		s.CAFile = filepath.Join(filepath.Dir(p), s.CAFile)
	}
	out, err := userdata.Render(s)
	if err != nil {
		return nil, fmt.Errorf("--userdata %s: %w", p, err)
	}
	return out, nil
}

// desiredFromGroup is --resume without inputs: the state the group's
// version (one drover made) describes.
func desiredFromGroup(ctx context.Context, env *rollout.Env, group string) (rollout.Desired, error) {
	st, err := env.Observe(ctx, group)
	if err != nil {
		return rollout.Desired{}, err
	}
	for _, v := range st.Versions {
		if formatVersion(v) != st.Group.TemplateVersion && !(v.Default && strings.EqualFold(st.Group.TemplateVersion, "Default")) {
			continue
		}
		s, ok := rollout.ParseStamp(v.Description)
		if !ok {
			return rollout.Desired{}, usage("scaling group %s launches from version %d, which drover did not make (%q): pass --image and --userdata", group, v.Number, v.Description)
		}
		digest, err := nodecontract.ConfigDigest(v.UserData)
		if err != nil {
			return rollout.Desired{}, fmt.Errorf("launch template %s version %d: %w", v.TemplateID, v.Number, err)
		}
		return rollout.Desired{ImageID: v.ImageID, BuildID: s.BuildID, Config: digest, UserData: v.UserData}, nil
	}
	return rollout.Desired{}, fmt.Errorf("scaling group %s: launch template version %s not found: pass --image and --userdata", group, st.Group.TemplateVersion)
}

func formatVersion(v rollout.TemplateVersion) string { return fmt.Sprint(v.Number) }

// lockOwner names this run in the group's lock: user@host (a CronJob's
// host is its pod), with no spaces and short enough for a tag value.
func lockOwner() string {
	name := os.Getenv("USER")
	if u, err := user.Current(); err == nil && u.Username != "" {
		name = u.Username
	}
	host, _ := os.Hostname()
	o := strings.Join(strings.Fields(firstNonEmpty(name, "unknown")+"@"+firstNonEmpty(host, "unknown")), "_")
	if len(o) > 64 {
		o = o[:64]
	}
	return o
}

func firstNonEmpty(a, b string) string {
	if a != "" {
		return a
	}
	return b
}

func kubeClient(path string) (kubernetes.Interface, error) {
	rules := clientcmd.NewDefaultClientConfigLoadingRules()
	rules.ExplicitPath = path
	cfg, err := clientcmd.NewNonInteractiveDeferredLoadingClientConfig(rules, &clientcmd.ConfigOverrides{}).ClientConfig()
	if err != nil {
		return nil, fmt.Errorf("the cluster's kubeconfig: %w: pass --kubeconfig", err)
	}
	cfg.UserAgent = "drover-rollout"
	return kubernetes.NewForConfig(cfg)
}

// eventPrinter prints events: JSON lines on stdout (cloud/event, as
// drover publish prints its own), or plan lines on stdout and progress on
// log.
func eventPrinter(asJSON bool, stdout, log io.Writer) func(rollout.Event) {
	if asJSON {
		return event.JSONLines(stdout, time.Now)
	}
	var mu sync.Mutex
	return func(e rollout.Event) {
		mu.Lock()
		defer mu.Unlock()
		switch {
		case e.Kind == rollout.EventPlan || e.Kind == rollout.EventDone || e.Kind == rollout.EventPaused:
			fmt.Fprintln(stdout, e.Message)
		default:
			who := e.Instance
			if e.Node != "" && e.Node != e.Instance {
				who += " (" + e.Node + ")"
			}
			if who != "" {
				who += ": "
			}
			fmt.Fprintf(log, "%s %s %s%s\n", e.Time.Format("15:04:05"), e.Kind, who, e.Message)
		}
	}
}

// countOrPercent reads a limit given as a count ("2") or a percentage of
// the group's size ("25%").
func countOrPercent(flag, v string) (n, percent int, err error) {
	s, pct := strings.CutSuffix(strings.TrimSpace(v), "%")
	x, perr := strconv.Atoi(s)
	switch {
	case perr != nil || x < 0:
		return 0, 0, usage("%s %q: want a number (2) or a percentage of the group's size (25%%)", flag, v)
	case pct && (x < 1 || x > 100):
		return 0, 0, usage("%s %q: a percentage must be within 1%%..100%%", flag, v)
	case pct:
		return 0, x, nil
	}
	return x, 0, nil
}
