package agent

import (
	"bytes"
	"context"
	"debug/buildinfo"
	"encoding/json"
	"fmt"
	"os"
	"strings"
	"time"

	"github.com/drover-os/drover/agent/ignition"
	"github.com/drover-os/drover/agent/kube"
	"github.com/drover-os/drover/agent/nodeconfig"
	"github.com/drover-os/drover/agent/provider"
	"github.com/drover-os/drover/internal/atomicfile"
)

// config decides which configuration this boot applies: on every boot the
// instance's user-data, fetched from the metadata service before anything
// is written. Nothing under /var decides what runs: root on the node (a
// privileged pod) can rewrite the stored config, its digest and the
// remote contents, but not the user-data. What /var holds only says
// whether the user-data changed since the first boot (refused: the node
// is immutable) and, once confirmed against the user-data, lets a joined
// node re-apply the redacted copy so that the bootstrap token never comes
// back. A metadata service that does not answer fails the boot closed:
// the kubelet is not started from what /var holds.
func (a *Agent) config(ctx context.Context) (string, error) {
	data, present, err := a.fetchMetadata(ctx)
	if err != nil {
		return "", fmt.Errorf("%w; nothing is applied until the metadata service answers: the node never falls back to the copy in %s", err, StateDir)
	}
	st := a.readState()
	switch {
	case !present && !st.provisioned:
		return "", errNoConfig
	case !present:
		return "", fmt.Errorf("the instance has no user-data now, but it was provisioned from one: nothing is applied (the copy in %s is applied only once the user-data confirms it); give the instance back the user-data it was launched with, or replace it", StateDir)
	case st.want != "" && digest(data) != st.want:
		a.rec.Note("REFUSED: user-data changed since first boot (sha256 " + digest(data)[:12] + " vs stored " + st.want[:12] + "): " + ErrImmutable.Error())
		return "", fmt.Errorf("the user-data changed since the first boot (sha256 %s, launched with %s) and is REFUSED; nothing is applied: %w", digest(data)[:12], st.want[:12], ErrImmutable)
	}
	a.launchedWith = digest(data)
	from := fmt.Sprintf("user-data from %s (%d bytes, sha256 %s), instance %s", a.env.Provider.Name(), len(data), digest(data)[:12], a.facts.InstanceID)
	if !st.provisioned {
		a.userData = data
		return from, nil
	}
	certErr := a.clientCertErr()
	why := "no stored config in " + StoredConfig
	if st.stored != nil {
		why = a.confirmStored(ctx, st.stored, data)
	}
	if why == "" {
		if certErr != nil && !bytes.Equal(st.stored, data) {
			// The stored config is redacted and the kubelet's
			// certificate cannot be used: the kubelet bootstraps again,
			// with the token of the user-data.
			a.userData = data
			a.rec.Note("the kubelet's client certificate cannot be used (" + certErr.Error() + "): bootstrapping again with the token of the user-data")
			return from + ", unchanged since first boot, to bootstrap again", nil
		}
		a.userData, a.fromStore = st.stored, true
		return from + ", unchanged since first boot; the stored config confirmed against it is re-applied", nil
	}
	// Provisioned before, but the stored config is gone or is not the
	// user-data's: drift. The user-data is applied, its token redacted
	// first when the kubelet has its own certificate, and the stored copy
	// is written again from it.
	a.rec.Note("DRIFT: " + why + " — the instance's user-data is applied instead; nothing of the stored copy is used; the node is immutable: replace the instance")
	a.rec.SetState("provisioning", "drift: "+why)
	a.known.add(Drift{Path: StoredConfig, What: "contents", Want: "the user-data's (sha256 " + digest(data) + ", token redacted)", Got: st.got()})
	a.userData, a.restore = data, true
	gone, err := a.pruneContents(data)
	if err != nil {
		return "", err
	}
	if len(gone) > 0 {
		a.rec.Note("DRIFT: removed what the user-data does not name from " + ContentsDir + ": " + strings.Join(gone, ", "))
	}
	if secret := tokenSecretOf(data); secret != "" && certErr == nil {
		red, err := ignition.Redact(data, secret, nodeconfig.RedactedSecret, ignition.DirCache(a.path(ContentsDir)))
		if err != nil {
			return "", fmt.Errorf("redacting the bootstrap token of the user-data: %w", err)
		}
		a.userData, a.fromStore = red.Config, true
	}
	return from + "; the stored config was NOT the user-data's (" + why + "): the user-data is applied", nil
}

// state is what /var says of earlier boots.
type state struct {
	stored []byte // the stored config; nil when there is none
	// want is the digest of the user-data the instance was launched
	// with, "" when nothing records it.
	want string
	// provisioned: an earlier boot applied a config (any of the agent's
	// records, or the kubelet's certificate, is there).
	provisioned bool
}

// got names the stored config for a drift report.
func (s state) got() string {
	if s.stored == nil {
		return "missing"
	}
	return digest(s.stored)
}

// readState reads what earlier boots left in /var. It decides nothing by
// itself: config compares it with the user-data.
func (a *Agent) readState() state {
	var s state
	if b, err := os.ReadFile(a.path(StoredConfig)); err == nil {
		s.stored = b
	}
	if b, err := os.ReadFile(a.path(StoredDigest)); err == nil {
		if d := strings.TrimSpace(string(b)); len(d) == 64 {
			s.want = d
		}
	}
	s.provisioned = s.stored != nil || s.want != "" || fileExists(a.path(ConfigStateFile)) || fileExists(a.path(KubeletCert))
	return s
}

// writeLaunchedWith records the digest of the user-data as given, which
// later boots compare the user-data with, unless StoredDigest holds it
// already (it is only ever the user-data's: config refused any other).
func (a *Agent) writeLaunchedWith() error {
	b, err := os.ReadFile(a.path(StoredDigest))
	if err == nil && strings.TrimSpace(string(b)) == a.launchedWith {
		return nil
	}
	return atomicfile.Write(a.path(StoredDigest), []byte(a.launchedWith+"\n"), 0o644)
}

// fetchMetadata waits for a route to the metadata service (on ECS), then
// fetches the user-data and the instance facts (into a.facts).
func (a *Agent) fetchMetadata(ctx context.Context) ([]byte, bool, error) {
	if a.env.MetadataOverNetwork {
		// Event-driven (netlink): returns as soon as DHCP has configured
		// an interface with a default route. The network phase still
		// picks the primary interface by the metadata's MAC.
		if _, err := a.env.Network(ctx, ""); err != nil {
			return nil, false, fmt.Errorf("waiting for a network route to the %s metadata service: %w", a.env.Provider.Name(), err)
		}
	}
	data, present, err := a.env.Provider.UserData(ctx)
	if err != nil {
		return nil, false, fmt.Errorf("fetching user-data from %s: %w", a.env.Provider.Name(), err)
	}
	facts, err := a.env.Provider.Facts(ctx)
	if err != nil {
		return nil, false, fmt.Errorf("reading instance facts from %s: %w", a.env.Provider.Name(), err)
	}
	a.facts = facts
	return data, present, nil
}

// apply validates the whole config, then writes it; nothing is written
// unless everything validates.
func (a *Agent) apply(ctx context.Context) (string, error) {
	opts := Options(a.env.Fetcher)
	parse := nodeconfig.Parse
	if a.fromStore {
		// The stored config of a joined node carries a redacted token.
		opts.Extra, parse = joinedNodeFileCheck, nodeconfig.ParseJoined
	}
	opts.Contents = ignition.DirCache(a.path(ContentsDir))
	plan, err := ignition.Prepare(ctx, a.userData, opts)
	if err != nil {
		return "", err
	}
	applied, err := ignition.Apply(plan, a.env.Root)
	if err != nil {
		return "", err
	}
	a.managed = applied.Managed
	for _, m := range a.managed {
		a.watch.add(a.env.Root, m, "user-data")
	}
	a.watch.baselineNode(a.env.Root) // before the reload and the boot services' re-runs below
	a.start = plan.Start
	// Before READY=1: units ordered after the agent, and the image units
	// the agent starts itself (containerd, kubelet), must see the config's
	// units and drop-ins. A daemon-reload re-runs every generator and
	// re-reads every unit (a second or more under emulation); systemd
	// needs it only to see units the config wrote. The agent's own files
	// (containerd's and the kubelet's configuration, /etc/default/kubelet)
	// are read by the services when they start.
	if a.wroteUnder("/etc/systemd/") {
		if err := a.env.Systemd.Reload(ctx); err != nil {
			return "", err
		}
	}
	// The agent is not ordered after these boot services (so it starts
	// seconds earlier), and each may have read its directory before the
	// config was written; a config that writes there gets them run again,
	// so its files apply on every boot and not by the luck of ordering.
	for _, r := range rerunAfterApply {
		if a.wroteUnder(r.dir) {
			if err := a.env.Systemd.Restart(ctx, r.unit); err != nil {
				return "", fmt.Errorf("applying the config's %s files: %w", r.dir, err)
			}
		}
	}
	// What the config wrote must leave the protected units as the image
	// ships them, as systemd resolved them after the reload: the static
	// policy judged paths, this judges the effect.
	if err := a.guarantees(ctx, seeUnits); err != nil {
		return "", err
	}
	nf, err := os.ReadFile(a.path(NodeFile))
	if err != nil {
		return "", fmt.Errorf("reading the node file the config wrote: %w", err)
	}
	node, err := parse(nf, NodeFile)
	if err != nil {
		return "", err
	}
	a.node = node
	// The stored copy is written on the first boot, and again when it
	// was not the user-data's (config found it gone or changed).
	if a.restore || !fileExists(a.path(StoredConfig)) {
		if err := atomicfile.Write(a.path(StoredConfig), a.userData, 0o600); err != nil {
			return "", err
		}
	}
	if err := a.writeLaunchedWith(); err != nil {
		return "", err
	}
	if err := a.recordConfigDigest(); err != nil {
		return "", err
	}
	m, _ := json.MarshalIndent(a.managed, "", "  ")
	if err := atomicfile.Write(a.path(ManagedFile), m, 0o644); err != nil {
		return "", err
	}
	return fmt.Sprintf("%d paths managed", len(a.managed)), nil
}

func (a *Agent) network(ctx context.Context) (string, error) {
	p, err := a.env.Network(ctx, a.facts.MAC)
	if err != nil {
		return "", err
	}
	a.primary = p
	a.nodeName = strings.ToLower(a.facts.Hostname)
	if a.nodeName == "" {
		a.nodeName = strings.ToLower(a.facts.InstanceID)
	}
	if err := a.env.Prepare(a.nodeName); err != nil {
		return "", err
	}
	a.watch.rewrote(a.env.Root, "/etc/hostname") // Prepare wrote it, over the config's
	// Names (the API server's, a registry mirror's, the metadata's time
	// servers) resolve through resolved's stub from here on; the agent is
	// not ordered after it, so it waits for it here, where it is usually
	// up already (a start job on an active unit returns at once).
	if err := a.env.Systemd.Start(ctx, ResolvedUnit); err != nil {
		return "", fmt.Errorf("name resolution for the cluster: %w", err)
	}
	if err := await(ctx, a.kernel, "kernel prerequisites (loaded since the agent started)"); err != nil {
		return "", err
	}
	return fmt.Sprintf("%s %s via %s, hostname %s", p.Link, p.IPv4, p.Gateway, a.nodeName), nil
}

// await waits for the result of a background phase, named by what.
func await(ctx context.Context, result <-chan error, what string) error {
	select {
	case err := <-result:
		if err != nil {
			return fmt.Errorf("%s: %w", what, err)
		}
		return nil
	case <-ctx.Done():
		return fmt.Errorf("waiting for %s: %w", what, ctx.Err())
	}
}

// kernelPrep loads the node's kernel modules and sysctls (br_netfilter,
// overlay, forwarding): seconds of modprobe under emulation that need
// nothing from the user-data, so they overlap the metadata fetch.
func (a *Agent) kernelPrep(ctx context.Context) (string, error) {
	if a.env.Kernel == nil {
		return "nothing to load", nil
	}
	if err := a.env.Kernel(); err != nil {
		return "", err
	}
	return "modules and sysctls in place", nil
}

func (a *Agent) nodeFacts() nodeconfig.Facts {
	f := a.facts
	ip := f.PrivateIPv4
	if ip == "" {
		ip = a.primary.IPv4
	}
	// The ECS client has checked them already; facts files have not.
	ntp, _ := provider.ParseNTPServers(f.NTPServers)
	return nodeconfig.Facts{InstanceID: f.InstanceID, RegionID: f.RegionID, ZoneID: f.ZoneID,
		InstanceType: f.InstanceType, Hostname: a.nodeName, PrivateIPv4: ip, SecureBoot: a.secureBoot, NTPServers: ntp,
		BuildID: a.buildID(), ConfigDigest: a.configDigestLabel(), ACRProvider: a.shipsACRProvider(),
		CachedRepositories: a.cachedRepositories(), KubeletVersion: a.kubeletVersion()}
}

// kubeletVersion is the kubelet binary's Kubernetes version; "" when it
// is not known (then the kubelet's configuration sets nothing that only
// some versions accept).
func (a *Agent) kubeletVersion() string {
	if a.env.KubeletVersion == nil {
		return ""
	}
	v, err := a.env.KubeletVersion()
	if err != nil {
		a.rec.Note("the kubelet's version: " + err.Error())
		return ""
	}
	return v
}

// KubeletVersion reads the Kubernetes version of the kubelet binary from
// its Go build information (k8s.io/kubernetes, the main module or a
// dependency of the build's wrapper module): a read of a few pages, not a
// run of the 90 MB binary (Env.KubeletVersion's value for drover-agent).
func KubeletVersion() (string, error) {
	bi, err := buildinfo.ReadFile(KubeletBinaries[0])
	if err != nil {
		return "", err
	}
	if bi.Main.Path == kubernetesModule {
		return bi.Main.Version, nil
	}
	for _, d := range bi.Deps {
		if d.Path == kubernetesModule {
			return d.Version, nil
		}
	}
	return "", fmt.Errorf("%s: no %s in its build information", KubeletBinaries[0], kubernetesModule)
}

const kubernetesModule = "k8s.io/kubernetes"

// cachedRepositories are the repositories of the image's cached images,
// which the kubelet is told never to re-verify; none when the image has no
// cache or its file does not read (the image cache phase reports that).
func (a *Agent) cachedRepositories() []string {
	c, err := a.readImageCache()
	if err != nil {
		return nil
	}
	return c.Repositories()
}

// shipsACRProvider says the image has the ACR credential provider, which
// the kubelet is then configured to use (docs/node-config.md, "Private ACR
// images"): a kubelet told to use a plugin that is not there does not
// start.
func (a *Agent) shipsACRProvider() bool {
	st, err := os.Stat(a.path(nodeconfig.ACRProviderPath))
	return err == nil && st.Mode().IsRegular()
}

// sizeFacts reads the instance's size into f, from which the kubelet's
// reservations are computed, and says what is reserved.
func (a *Agent) sizeFacts(f *nodeconfig.Facts) string {
	if a.env.Size == nil {
		return "no reservations: the instance's size is not known"
	}
	cpus, mem, err := a.env.Size()
	if err != nil {
		return "no reservations: reading the instance's size: " + err.Error()
	}
	r, ok := nodeconfig.Reserve(cpus, mem)
	if !ok {
		return fmt.Sprintf("no reservations: the instance's size reads %d CPUs and %d bytes of memory", cpus, mem)
	}
	f.CPUs, f.MemTotal = cpus, mem
	return fmt.Sprintf("reserved for %d CPUs and %d MiB: kube %s/%s, system %s/%s", cpus, mem>>20,
		r.KubeReserved["cpu"], r.KubeReserved["memory"], r.SystemReserved["cpu"], r.SystemReserved["memory"])
}

// runtime renders the kubelet's configuration into the tmpfs /etc and
// waits for containerd, which has been starting since apply.
func (a *Agent) runtime(ctx context.Context) (string, error) {
	if _, err := a.clusterCA(ctx); err != nil {
		return "", err
	}
	facts := a.nodeFacts()
	sized := a.sizeFacts(&facts)
	// The bootstrap kubeconfig is written only while the kubelet has no
	// usable client certificate; once joined it is deleted and not
	// rewritten until the certificate expires.
	bootstrap := !fileExists(a.path(nodeconfig.KubeconfigPath)) || a.clientCertErr() != nil
	files, err := nodeconfig.Render(a.node, facts, facts.PrivateIPv4, bootstrap)
	if err != nil {
		return "", err
	}
	if err := a.writeFiles(files); err != nil {
		return "", err
	}
	serving, err := ensureServingCert(a.env.Root, a.nodeName, time.Now())
	if err != nil {
		return "", err
	}
	done := []string{"kubelet configuration written", sized, serving}
	if !bootstrap {
		done = append(done, a.markStaleReady(ctx))
	}
	// timesyncd's drop-in is written: the time phase starts it.
	close(a.rendered)
	// containerd has been starting since apply (startContainerd).
	if err := await(ctx, a.containerd, "containerd (started after apply)"); err != nil {
		return "", err
	}
	return strings.Join(append(done, "containerd active"), ", "), nil
}

// staleReadyTimeout bounds markStaleReady: it only shortens the join.
const staleReadyTimeout = 5 * time.Second

// markStaleReady marks the Node's Ready condition Unknown on a later boot,
// before the kubelet starts: it is what the kubelet posted before the
// reboot. The kubelet's fast first status update (every 100 ms until the
// node is ready) ends at once on a Node whose Ready is True already, so a
// rebooted kubelet reported Ready only with its next periodic status, 4-6
// s after it registered, and the node lifecycle controller would mark the
// stale condition Unknown only after its grace period. With the kubelet's
// own credentials (a node may patch its own status); best effort: on an
// error the kubelet's periodic status still comes, and the runtime
// phase's detail says why.
func (a *Agent) markStaleReady(ctx context.Context) string {
	ctx, cancel := context.WithTimeout(ctx, staleReadyTimeout)
	defer cancel()
	marked, err := a.unreadyStale(ctx)
	switch {
	case err != nil:
		return "the Node's Ready condition from before the reboot stays until the kubelet posts status (" + err.Error() + ")"
	case !marked:
		return "the Node's Ready condition is not True: left to the kubelet"
	}
	return "the Node's Ready condition from before the reboot marked Unknown"
}

// unreadyStale sets the Node's Ready condition Unknown if it is True, and
// says whether it did.
func (a *Agent) unreadyStale(ctx context.Context) (bool, error) {
	api, name, err := a.API()
	if err != nil {
		return false, err
	}
	n, err := api.GetNode(ctx, name)
	if err != nil || !n.Ready() {
		return false, err
	}
	return true, api.SetCondition(ctx, name, kube.Condition{Type: "Ready", Status: "Unknown", Reason: "NodeRebooted",
		Message: "drover-agent: the node has rebooted and its kubelet not posted status since"})
}

// ResolvedUnit answers the node's DNS (/etc/resolv.conf is its stub).
const ResolvedUnit = "systemd-resolved.service"

// TimesyncdUnit keeps the clock right. The image does not enable it: the
// time phase starts it on its rendered configuration (after apply's
// daemon-reload, so a user-data drop-in for it applies too), as soon as
// runtime has written that. Its start and the kubelet's run side by
// side, in either order, and the kubelet does not wait for it: timesyncd
// being active says nothing of the clock being synchronised (which the
// kubelet's certificates, and the API server's, do need; the image's
// clock starts from the instance's RTC), and its start-up (a second or
// more under emulation) overlapped containerd's on a first boot but held
// up the kubelet on a later one, where containerd is up by then.
const TimesyncdUnit = "systemd-timesyncd.service"

// startTime is the time phase: it starts timesyncd once runtime has
// written its drop-in. The agent joins only once it has started.
func (a *Agent) startTime(ctx context.Context) (string, error) {
	select {
	case <-a.rendered:
	case <-ctx.Done():
		return "", fmt.Errorf("waiting for the runtime phase to write %s: %w", nodeconfig.TimesyncdDropIn, ctx.Err())
	}
	f := a.nodeFacts()
	what := "time servers " + strings.Join(f.NTPServers, " ") + " from the metadata"
	if len(f.NTPServers) == 0 {
		what = "no time servers in the metadata (ntp-conf/ntp-servers): timesyncd's defaults"
		a.rec.Note("time: " + what + " — " + nodeconfig.TimesyncdDropIn + " sets none")
	}
	if err := a.env.Systemd.Start(ctx, TimesyncdUnit); err != nil {
		return "", fmt.Errorf("starting %s (%s): %w", TimesyncdUnit, nodeconfig.TimesyncdDropIn, err)
	}
	return TimesyncdUnit + " on " + what, nil
}

// writeFiles writes rendered configuration into the tmpfs /etc, each file
// with the mode nodeconfig's table declares for it.
func (a *Agent) writeFiles(files []nodeconfig.File) error {
	for _, f := range files {
		if err := atomicfile.Write(a.path(f.Path), f.Data, f.Mode); err != nil {
			return err
		}
		a.watch.add(a.env.Root, ignition.Managed{Path: f.Path, Kind: "file", SHA256: digest(f.Data)}, "agent")
		at := changeTime(a.path(f.Path))
		if at.IsZero() {
			return fmt.Errorf("reading back %s after writing it: no change time", f.Path)
		}
		a.files.put(f.Path, f.Data, at)
	}
	return nil
}

// startContainerd writes containerd's configuration, which depends on the
// node file alone, and starts containerd (apply reloaded systemd if the
// config wrote units or drop-ins, so those for containerd apply). The agent
// runs it as its own phase beside network and runtime, so containerd's start
// (seconds under emulation) overlaps the network wait and the kubelet's
// configuration; runtime waits for its result. The detail says how long it
// took.
func (a *Agent) startContainerd(ctx context.Context) (string, error) {
	a.prefetch(KubeletBinaries...)
	if err := a.containerStorage(ctx); err != nil {
		return "", err
	}
	files, err := nodeconfig.RenderContainerd(a.node)
	if err != nil {
		return "", err
	}
	if err := a.writeFiles(files); err != nil {
		return "", err
	}
	t := a.env.Uptime()
	if err := a.env.Systemd.Start(ctx, "containerd.service"); err != nil {
		return "", err
	}
	return fmt.Sprintf("containerd active after %.1fs", a.env.Uptime()-t), nil
}

// KubeletBinaries are read ahead (Env.Prefetch) when containerd starts.
// Under emulation every page of a binary is read and hashed by dm-verity
// when it is first touched, and the kubelet faults in much of its 90 MB
// one page cluster at a time while it initialises. Read beside
// containerd's start-up, over three fresh instances each, the kubelet
// answered healthz 2.1-4.6 s after its start instead of 5.0-7.3 s, and
// containerd took 6.2-8.4 s instead of 4.4-6.2 s: the two together were
// 0.7 s (first boot) and 1.7 s (reboot) shorter in the median. Nothing
// else is read ahead: containerd's binaries, read at the agent's start,
// took 6 s beside udevd and networkd, DHCP completed about 2 s later, and
// containerd started no faster from the cache.
var KubeletBinaries = []string{"/usr/bin/kubelet"}

func (a *Agent) prefetch(paths ...string) {
	if a.env.Prefetch != nil {
		a.env.Prefetch(paths...)
	}
}

// rerunAfterApply are the boot services that read a directory a config
// may write into, run again after apply when it did.
var rerunAfterApply = []struct{ dir, unit string }{
	{"/etc/modules-load.d/", "systemd-modules-load.service"},
	{"/etc/sysctl.d/", "systemd-sysctl.service"},
	{"/etc/tmpfiles.d/", "systemd-tmpfiles-setup.service"},
}

// wroteUnder says whether the applied config manages anything under dir
// (for /etc/systemd/: units, drop-ins, enable links).
func (a *Agent) wroteUnder(dir string) bool {
	for _, m := range a.managed {
		if strings.HasPrefix(m.Path, dir) {
			return true
		}
	}
	return false
}

func (a *Agent) kubelet(ctx context.Context) (string, error) {
	t := a.env.Uptime()
	a.kubeletStart = time.Now()
	if err := a.env.Systemd.Start(ctx, "kubelet.service"); err != nil {
		return "", err
	}
	started := a.env.Uptime()
	// The kubelet runs: its command line and configuration are judged at
	// once, before its TLS bootstrap can register the Node; its ports once
	// it answers healthz (they are up by then).
	if err := a.guarantees(ctx, seeProcesses); err != nil {
		return "", a.stopKubelet(err)
	}
	if err := a.waitFor(ctx, "kubelet healthz", func() (bool, error) {
		err := a.env.Healthz(ctx)
		return err == nil, err
	}); err != nil {
		return "", err
	}
	if err := a.guarantees(ctx, seePorts); err != nil {
		return "", a.stopKubelet(err)
	}
	a.kubeletChecked.Store(true)
	return fmt.Sprintf("kubelet healthy (kubelet.service started after %.1fs, healthz answered %.1fs later); its units, command line, configuration and ports hold the node's guarantees", started-t, a.env.Uptime()-started), nil
}

// certificate waits for a valid client certificate of the kubelet, then
// removes the bootstrap token from what the node keeps: from here on the
// certificate (renewed by the kubelet) is the node's credential.
func (a *Agent) certificate(ctx context.Context) (string, error) {
	if err := a.waitFor(ctx, "the kubelet's client certificate (CSR approval)", func() (bool, error) {
		err := a.clientCertErr()
		return err == nil, err
	}); err != nil {
		return "", fmt.Errorf("%w: is the CSR approver running and the bootstrap token valid?", err)
	}
	detail, err := a.redactSecrets()
	if err != nil {
		return "", err
	}
	return KubeletCert + "; " + detail, nil
}

func (a *Agent) ready(ctx context.Context) (string, error) {
	if err := await(ctx, a.sandbox, "the sandbox image's import (started beside the kubelet)"); err != nil {
		return "", err
	}
	api, _, err := a.API()
	if err != nil {
		return "", err
	}
	var reason string
	err = a.waitFor(ctx, "Node "+a.nodeName+" Ready", func() (bool, error) {
		n, err := api.GetNode(ctx, a.nodeName)
		if err != nil {
			return false, err
		}
		ok, why := n.ReadySince(a.kubeletStart)
		reason = why
		return ok, fmt.Errorf("not ready: %s", why)
	})
	if err != nil {
		return "", err
	}
	return "node " + a.nodeName + " Ready (" + reason + ")", nil
}

// cleanup deletes the bootstrap credentials: the kubelet now has its own.
func (a *Agent) cleanup(ctx context.Context) (string, error) {
	p := a.path(nodeconfig.BootstrapKubeconfigPath)
	if err := os.Remove(p); err != nil && !os.IsNotExist(err) {
		return "", fmt.Errorf("deleting the bootstrap kubeconfig: %w", err)
	}
	a.watch.remove(nodeconfig.BootstrapKubeconfigPath)
	return "bootstrap kubeconfig deleted", nil
}

// API returns the API client for the guard, with the kubelet's credentials.
func (a *Agent) API() (NodeAPI, string, error) {
	api, err := a.env.Kube(a.node.Cluster.Server, []byte(a.node.Cluster.CAData), a.path(KubeletCert))
	return api, a.nodeName, err
}
