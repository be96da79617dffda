//go:build e2e

package e2e

import (
	"context"
	"encoding/xml"
	"os"
	"regexp"
	"strings"
	"testing"
	"time"
)

// TestEcsNodeJoins runs what a user runs, from a fresh clone's root with
// relative paths: `make smoke` (build the default recipe, then the
// pipeline's gate: join through a hardened metadata service that fails,
// delays and expires a token; providerID and labels; a Pod from the local
// registry; node hardening; a reboot with the disk moved to NVMe, stored
// config, /etc edit gone, a tampered stored config reported and not applied, a
// changed user-data refused; a policy-breaking
// user-data that must not join), then `make demo` until the API server
// says the node is Ready, then every other command the README and --help
// show (documented_test.go). The JUnit report must list every check as
// passed, and the two builds of the image must be bit-identical.
func TestEcsNodeJoins(t *testing.T) {
	c := freshClone(t)
	out, code := c.sh(t, 75*time.Minute, "make smoke")
	t.Logf("make smoke:\n%s", tail(out, 40))
	if code != 0 {
		// The failed checks first: CI shows only part of a long log.
		var failed []string
		for _, l := range strings.Split(out, "\n") {
			if strings.HasPrefix(l, "FAIL ") {
				failed = append(failed, l)
			}
		}
		t.Fatalf("make smoke: exit %d; failed checks:\n%s\n\n%s", code, strings.Join(failed, "\n"), tail(out, 120))
	}
	checkSmokeJUnit(t, c.path("out/smoke.xml"), smokeChecks)
	first := fileSHA(t, c.path("out/ecs-node.raw"))

	t.Run("make demo", func(t *testing.T) { demo(t, c) })
	if second := fileSHA(t, c.path("out/ecs-node.raw")); second != first {
		t.Errorf("make demo rebuilt out/ecs-node.raw with sha256 %s; make smoke's build was %s: the build is not reproducible", second, first)
	}
	t.Run("documented commands", func(t *testing.T) { documentedCommands(t, c) })
}

// smokeChecks are the checks `make smoke` must report, each passed.
var smokeChecks = []string{
	"node joins and is Ready", "metadata faults injected and survived", "providerID and ECS labels",
	"Node reports the image's kubelet and containerd",
	// Issue 26: what drover rollout compares with the launch template.
	"Node labelled with the image's build ID and the user-data's config digest",
	"pod from the local registry runs to completion",
	// Issue 37: Kubernetes' own tests, a subset on the smoke's boot.
	"Kubernetes e2e [NodeConformance] subset",
	"node hardening", "disk attached as virtio-blk",
	"edit /etc before the reboot", "reboot with the disk on NVMe", "Ready again after the reboot",
	"disk attached as NVMe after the reboot", "/etc edit gone",
	"refusal on the console", "refusal in the status file", "refused node does not join",
	"no failed systemd units (first boot)", "no failed systemd units (after the reboot)",
	"launch template units ran: oneshot, long-running, timer; kubelet drop-in and sysctl.d file in effect (first boot)",
	"launch template units ran: oneshot, long-running, timer; kubelet drop-in and sysctl.d file in effect (after the reboot",
	"systemd-analyze security drover-agent.service", "drift guard runs with CAP_DAC_READ_SEARCH and CAP_SYS_BOOT only",
	"DroverConfigDrift condition and one ConfigDrift Event", "DroverConfigDrift back to False after the restore",
	"serial console clean (first boot)", "serial console clean (after the reboot)",
	"systemd-timesyncd on the metadata's ntp-conf/ntp-servers (first boot)",
	"systemd-timesyncd on the metadata's ntp-conf/ntp-servers (after the reboot)",
	"no bootstrap token secret in /var after a clean shutdown (first boot)",
	"no bootstrap token secret in /var after a clean shutdown (after the reboots)",
	// Issue 25: container storage on the data disk, a disk holding ext4
	// untouched and reported, the same filesystem after the reboot.
	"container storage on the empty data disk (first boot", "container storage on the empty data disk (after the VM exited",
	"a disk holding a filesystem is untouched and the node says why",
	"container storage on the same data disk after the reboot",
	// Issue 23: the guarantees, checked by their effect on booted nodes.
	"privileged pod edits /var/lib/drover/config.ign (adds an enabled unit) and deletes /var/lib/drover/config.sha256",
	"edited stored config reported: DroverConfigDrift and a ConfigDrift Event name /var/lib/drover/config.ign (got ",
	"edited stored config: the planted unit did not run", "edited stored config: the planted unit was not written",
	// Issue 33: nothing on /var decides what runs.
	"privileged pod deletes /var/lib/drover/config.ign and plants a unit in /var/lib/drover/contents",
	"reboot with the user-data as at launch", "Ready again after the reboot without a stored config",
	"deleted stored config reported: DroverConfigDrift and a ConfigDrift Event name /var/lib/drover/config.ign (got missing)",
	"deleted stored config: the planted unit did not run", "deleted stored config: the planted unit was not written",
	"the planted remote contents were removed", "reboot with a changed user-data",
	"changed user-data refused in the config phase (console)",
	"refused with nothing applied: the status file names the refusal, no apply or kubelet phase ran",
	"no kubelet on the refused boot (API: the Node's bootID is the last joined boot's)",
	"run-time kubelet override passes the static policy", "boot with a kubelet override dropped at run time",
	"the agent's effect check refuses the kubelet (console)", "overridden node is not Ready (API)",
	"broken guarantee and the file named in the console and the status file",
	"no bootstrap token secret in /var after a clean shutdown (refused by the effect check)",
	"double-gzipped user-data refused by drover validate", "boot with double-gzipped user-data",
	"the node refuses it as drover validate does",
	"no bootstrap token secret in /var after a clean shutdown (double-gzipped user-data refused)",
	// Issue 25: graceful stop and reservations, on the same boots.
	"allocatable is capacity less the reservations for the VM's size (first boot, 3072 MiB)",
	"allocatable is capacity less the reservations for the VM's size (after the reboot, 4096 MiB)",
	"spot reclaim notice: Node cordoned and tainted, SpotInterruption Event, preStop hook ran and pod stopped by the kubelet before power-off",
	"kernel OOM kill reported: OOMKilling Event with the kernel's line, pod OOMKilled, node Ready",
	"sandbox image shipped in the image", "no registry reachable: a pod whose image the node holds runs",
	"filesystem error reported: FilesystemError Event and ReadonlyFilesystem=True with the kernel's lines",
	"memory pressure: MemoryPressure False before, True while the node is short of memory (below the pool's 1Gi soft threshold), Node Ready throughout",
	"memory pressure over: MemoryPressure False again after the kubelet's transition period; kubelet, containerd and drover-agent never restarted",
	"NIC link loss reported: NICLinkDown Event with the time the carrier went, condition False once it is back",
	"containerd restarting repeatedly reported: FrequentContainerdRestart condition and Event, node Ready",
	"ReadonlyFilesystem back to False after the reboot",
	"FrequentContainerdRestart back to False after the reboot",
	// Issue 37: the CIS ACK worker-node checks, judged on the booted node.
	"CIS ACK 1.0 worker node",
	// Issue 38: private ACR images with the instance's RAM role.
	"private ACR image runs with no imagePullSecret (login from the instance's RAM role)",
	"registry log: the private pull was authorized with a login ACR issued for the instance's RAM role",
	"RAM role detached: a pod with another private tag stays in ErrImagePull/ImagePullBackOff",
	"Node Event names the cause (ACRNoRAMRole, from the provider's status via the agent)",
	"kubelet's journal has the provider's error naming the cause",
	"credential provider's status file (/run/drover/credential-provider.status) holds the failure's class and no credential",
	"no STS or ACR credential issued to the node, nor the bootstrap token's secret, in its journal or /run/drover",
}

// checkSmokeJUnit requires the JUnit report at path to list each check in
// want (a prefix of its name) as passed, and no check failed.
func checkSmokeJUnit(t *testing.T, path string, want []string) {
	t.Helper()
	data, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	var suite struct {
		Tests    int `xml:"tests,attr"`
		Failures int `xml:"failures,attr"`
		Cases    []struct {
			Name    string    `xml:"name,attr"`
			Out     string    `xml:"system-out"`
			Failure *struct{} `xml:"failure"`
		} `xml:"testcase"`
	}
	if err := xml.Unmarshal(data, &suite); err != nil {
		t.Fatal(err)
	}
	for _, w := range want {
		found := false
		for _, c := range suite.Cases {
			if strings.HasPrefix(c.Name, w) {
				found = true
				t.Logf("%-70s %s", c.Name, c.Out)
				if c.Failure != nil {
					t.Errorf("check %q failed", c.Name)
				}
			}
		}
		if !found {
			t.Errorf("check %q missing from the JUnit report", w)
		}
	}
	if suite.Failures != 0 || suite.Tests != len(suite.Cases) {
		t.Errorf("%d of %d smoke checks failed (%d cases)", suite.Failures, suite.Tests, len(suite.Cases))
	}
}

// demoNode is what `drover run --cluster local` prints once the control
// plane is up: the node's name and the admin kubeconfig.
var demoNode = regexp.MustCompile(`run: node (\S+) joins \S+; kubeconfig: (\S+)`)

// demo runs `make demo` and stops it with Ctrl-C once the API server says
// the node is Ready.
func demo(t *testing.T, c *clone) {
	var node, kubeconfig string
	poll := time.Now()
	out := c.interactive(t, 45*time.Minute, "make demo", func(line string) bool {
		if m := demoNode.FindStringSubmatch(line); m != nil {
			node, kubeconfig = m[1], m[2]
		}
		// Ask the API server at most every 5 seconds.
		if kubeconfig == "" || time.Since(poll) < 5*time.Second {
			return false
		}
		poll = time.Now()
		ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
		defer cancel()
		ready, err := nodeReady(ctx, kubeconfig, node)
		if err != nil {
			t.Logf("asking the API server about node %s: %v", node, err)
		}
		return ready
	})
	if node == "" {
		t.Fatalf("make demo never printed the node and kubeconfig\n%s", tail(out, 60))
	}
	if !strings.Contains(out, "run: stopping") {
		t.Errorf("make demo did not stop cleanly on Ctrl-C\n%s", tail(out, 30))
	}
}
