package agent

import (
	"context"
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

// config decides which configuration this boot applies. On the first boot
// it is the user-data. On a later boot it is the copy stored at the first:
// the user-data is then only checked against it (a change is refused, not
// applied), so that check and the instance facts run beside apply and
// containerd's start (the metadata phase) rather than before them; only a
// redacted stored config whose kubelet certificate is unusable needs the
// user-data itself (its bootstrap token) first.
func (a *Agent) config(ctx context.Context) (string, error) {
	stored, serr := os.ReadFile(a.path(StoredConfig))
	var want string
	var certErr error // why the kubelet's certificate cannot be used (a redacted stored config only)
	if serr == nil {
		want = a.storedDigest(stored)
		redacted := digest(stored) != want
		if redacted {
			certErr = a.clientCertErr()
		}
		if certErr == nil {
			a.userData, a.fromStore, a.storedWant = stored, true, want
			what := ""
			if redacted {
				what = ", bootstrap token redacted"
			}
			return fmt.Sprintf("stored config from first boot (%d bytes%s), re-applied; the user-data is checked against it beside apply", len(stored), what), nil
		}
	}
	data, present, err := a.fetchMetadata(ctx)
	if err != nil {
		return "", err
	}
	switch {
	case serr == nil && present && digest(data) != want:
		a.refuse(data, want)
		a.userData, a.fromStore = stored, true
		return fmt.Sprintf("stored config from first boot (%d bytes); the changed user-data is REFUSED", len(stored)), nil
	case serr == nil && present:
		// The stored config is redacted (redactSecrets) and the kubelet's
		// certificate cannot be used: the kubelet must bootstrap again,
		// with the token of the user-data the instance was launched with.
		a.userData = data
		a.rec.Note("the kubelet's client certificate cannot be used (" + certErr.Error() + "): bootstrapping again with the token of the user-data (same sha256 " + want[:12] + " as at first boot)")
		return fmt.Sprintf("user-data from %s (%d bytes, unchanged since first boot), to bootstrap again", a.env.Provider.Name(), len(data)), nil
	case serr == nil:
		a.userData, a.fromStore = stored, true
		return fmt.Sprintf("stored config from first boot (%d bytes), re-applied; no user-data now", len(stored)), nil
	case !present:
		return "", errNoConfig
	}
	a.userData = data
	return fmt.Sprintf("user-data from %s (%d bytes), instance %s", a.env.Provider.Name(), len(data), a.facts.InstanceID), nil
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

// metadata is a later boot's check of the user-data against the stored
// config (config chose the stored one without waiting for it), and its
// fetch of the instance facts, which the network phase waits for.
func (a *Agent) metadata(ctx context.Context) (string, error) {
	defer close(a.checked)
	data, present, err := a.fetchMetadata(ctx)
	if err != nil {
		return "", err
	}
	switch {
	case !present:
		return "no user-data now; the stored config stands, unconfirmed, instance " + a.facts.InstanceID, nil
	case digest(data) != a.storedWant:
		a.refuse(data, a.storedWant)
		return "user-data changed since first boot: REFUSED, the stored config stands (it cannot be confirmed against the new user-data)", nil
	}
	if why := confirmStored(a.userData, data, ignition.DirCache(a.path(ContentsDir))); why != "" {
		a.tampered = why
		a.rec.Note("DRIFT: " + why + " — its enabled units are not started; the node is immutable: replace the instance")
		a.known.add(Drift{Path: StoredConfig, What: "contents", Want: "the user-data's (sha256 " + a.storedWant + ", token redacted)", Got: digest(a.userData)})
		return "user-data unchanged since first boot, but the stored config is NOT the user-data's: " + why, nil
	}
	return fmt.Sprintf("user-data unchanged since first boot (sha256 %s), stored config confirmed against it, instance %s", a.storedWant[:12], a.facts.InstanceID), nil
}

// refuse records that the user-data differs from what the instance was
// first provisioned with: the node keeps running the stored config and
// says so loudly.
func (a *Agent) refuse(data []byte, want string) {
	a.rec.Note("REFUSED: user-data changed since first boot (sha256 " + digest(data)[:12] + " vs stored " + want[:12] + "): " + ErrImmutable.Error())
	a.rec.SetState("provisioning", "user-data refused: "+ErrImmutable.Error())
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
	node, err := parse(mustRead(a.path(NodeFile)), NodeFile)
	if err != nil {
		return "", err
	}
	a.node = node
	if !fileExists(a.path(StoredConfig)) {
		if err := atomicfile.Write(a.path(StoredConfig), a.userData, 0o600); err != nil {
			return "", err
		}
		if err := atomicfile.Write(a.path(StoredDigest), []byte(digest(a.userData)+"\n"), 0o644); err != nil {
			return "", err
		}
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

func mustRead(p string) []byte {
	b, _ := os.ReadFile(p)
	return b
}

func (a *Agent) network(ctx context.Context) (string, error) {
	if a.metadataDone != nil {
		if err := await(ctx, a.metadataDone, "instance facts (metadata, fetched since config)"); err != nil {
			return "", err
		}
	}
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
		BuildID: a.buildID(), ConfigDigest: a.configDigestLabel()}
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
		a.files.put(f.Path, f.Data)
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
