//go:build e2e

package e2e

import (
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/base64"
	"encoding/json"
	"encoding/pem"
	"math/big"
	"os"
	"regexp"
	"strings"
	"testing"
	"time"
)

// A documented command is a line a user copies from README.md or from a
// --help example. documentedCommands runs each one from the fresh clone's
// root, literally where it can, and fails when a documented command has no
// step here: adding an example to --help or the README means adding it to
// this test.

// step is one command line run in the clone's root.
type step struct {
	line   string   // bash, run from the clone's root with its bin/ on PATH
	covers []string // the documented commands it runs (literally unless note says)
	note   string   // how it differs from the documented text, and why
	until  string   // "": run to completion; else Ctrl-C once a line contains it
	exit   int
	check  func(t *testing.T, out string)
}

// byEarlierTests are documented commands other tests run as typed:
// TestEcsNodeJoins before the steps (make smoke, which runs make build and
// make image, and make demo) and TestArm64Build (make smoke-arm64, and
// with it the flagless drover smoke).
var byEarlierTests = map[string]string{
	"make smoke":       "make smoke",
	"make demo":        "make demo",
	"make image":       "make smoke (its image prerequisite)",
	"make smoke-arm64": "TestArm64Build runs it as typed, in a fresh clone of its own",
	"drover smoke out/ecs-node.raw --reboot --policy-check --conformance --metadata-errors 0.3 --metadata-delay 2s --metadata-token-ttl 1s --junit out/smoke.xml": "make smoke runs exactly this (checked with make -n)",
	"drover build recipes/ecs-node.yaml -o out/": "make image runs it as `bin/drover build recipes/ecs-node.yaml -o out` (checked with make -n), twice: make smoke and make demo",
	// One boot of the default image fewer in make test (7m36s of
	// TestEcsNodeJoins on 2 cores): the flagless gate's code path is
	// booted by make smoke-arm64, which is this command with --junit
	// (checked with make -n), and TestArm64Build requires every check of
	// bareSmokeChecks passed in its output; make smoke boots this image
	// with the same binary and the fault, reboot and policy flags.
	"drover smoke out/ecs-node.raw": "the flagless gate: TestArm64Build's make smoke-arm64 runs `drover smoke out/ecs-node-arm64.raw --junit out/smoke-arm64.xml` and requires every bare-smoke check passed; make smoke runs it on this image with more flags",
}

// notRun are documented commands no test can run inside `make test`.
var notRun = map[string]string{
	"make test":   "it is the run this test is part of",
	"make e2e":    "the tier of make test this test runs in",
	"make bench":  "benchmarks: minutes of repeated boots, run by make bench itself",
	"make fuzz":   "long fuzzing; make test runs make fuzz-short",
	"make mutate": "mutation testing: about two hours on 2 cores; the README shows its last run",
	// make smoke runs the same drover smoke on the default minor, with the
	// same version check; the matrix is that, once per minor.
	"make smoke-matrix": "builds and boots every minor against a control plane of its own (hours on 2 cores); CI runs the default minor, make smoke",
	// The full [NodeConformance] run: make smoke (above) runs ten of its
	// specs on its own boot with --conformance.
	"make conformance": conformanceRun,
	"drover conformance out/ecs-node.raw --junit out/conformance.xml":         conformanceRun,
	"drover conformance out/ecs-node.raw --focus 'Pods should get a host IP'": conformanceRun,
	// drover publish and drover rollout act on a real account.
	"drover publish --region cn-hangzhou --bucket my-images out/ecs-node.raw":                                                                    cloudOnly,
	"drover rollout --region cn-hangzhou --scaling-group asg-bp1example --image m-bp1example --userdata pool.yaml --kubeconfig admin.kubeconfig": cloudOnly,
	"drover rollout --region cn-hangzhou --scaling-group asg-xxx --image m-xxx --userdata pool.yaml":                                             cloudOnly,
	"drover publish --region cn-hangzhou --bucket my-images --copy-to cn-shanghai,cn-beijing out/ecs-node.raw":                                   cloudOnly,
	"drover publish --region cn-hangzhou --bucket my-images --provenance --pub release.pub out/ecs-node.qcow2":                                   cloudOnly,
	"drover publish --dry-run --region cn-hangzhou --bucket my-images out/ecs-node.raw":                                                          cloudOnly,
	"drover rollout --region cn-hangzhou --scaling-group asg-xxx --image out/ecs-node.manifest.json --userdata pool.yaml --dry-run":              cloudOnly,
	"drover rollout --region cn-hangzhou --scaling-group asg-xxx --image m-xxx --userdata pool.yaml --json":                                      cloudOnly,
	"drover rollout --region cn-hangzhou --scaling-group asg-xxx --resume":                                                                       cloudOnly,
	"drover rollout --region cn-hangzhou --scaling-group asg-xxx --repair --after 10m":                                                           cloudOnly,
	"drover publish": cloudOnly,
	"drover rollout": cloudOnly,
}

const conformanceRun = "Kubernetes' e2e suite on a booted node: the full focus takes hours under TCG and each run boots a VM of its own; make smoke runs ten of its specs (drover smoke --conformance) on its own boot"

const cloudOnly = "it calls Alibaba Cloud (an account, a bucket, a scaling group); the same command runs against the emulated ECS, ESS and OSS (harness/ecsapi) in cmd/drover's publish and rollout tests and in TestRolloutQEMU"

// bareSmokeChecks are checks a flagless drover smoke runs on its one boot.
var bareSmokeChecks = []string{
	"node joins and is Ready", "providerID and ECS labels", "Node reports the image's kubelet and containerd",
	"pod from the local registry runs to completion", "node hardening", "disk attached as virtio-blk",
	"container storage on the empty data disk (first boot", "container storage on the empty data disk (after the VM exited",
	"a disk holding a filesystem is untouched and the node says why",
	"no failed systemd units (first boot)", "serial console clean (first boot)",
	"systemd-timesyncd on the metadata's ntp-conf/ntp-servers (first boot)",
	"allocatable is capacity less the reservations for the VM's size (first boot",
	"graceful node shutdown: preStop hook ran, pod stopped by the kubelet before power-off",
	"kernel OOM kill reported", "filesystem error reported",
	"memory pressure: MemoryPressure False before, True while the node is short of memory",
	"memory pressure over: MemoryPressure False again after the kubelet's transition period",
	"NIC link loss reported", "containerd restarting repeatedly reported",
	"sandbox image shipped in the image", "no registry reachable: a pod whose image the node holds runs",
	"systemd-analyze security drover-agent.service", "drift guard runs with CAP_DAC_READ_SEARCH and CAP_SYS_BOOT only",
	"CIS ACK 1.0 worker node",
	"private ACR image runs with no imagePullSecret (login from the instance's RAM role)",
	"registry log: the private pull was authorized with a login ACR issued for the instance's RAM role",
	"RAM role detached: a pod with another private tag stays in ErrImagePull/ImagePullBackOff",
	"Node Event names the cause (ACRNoRAMRole, from the provider's status via the agent)",
	"kubelet's journal has the provider's error naming the cause",
	"no STS or ACR credential issued to the node, nor the bootstrap token's secret, in its journal or /run/drover",
	"no bootstrap token secret in /var after a clean shutdown (first boot)",
}

// smokePassed requires a drover smoke report (its human form) with each
// check in want marked PASS and none marked FAIL.
func smokePassed(want []string) func(t *testing.T, out string) {
	return func(t *testing.T, out string) {
		for _, l := range strings.Split(out, "\n") {
			if strings.HasPrefix(l, "FAIL  ") {
				t.Errorf("drover smoke: %s", l)
			}
		}
		for _, w := range want {
			if !strings.Contains(out, "\nPASS  "+w) {
				t.Errorf("drover smoke reported no passed %q check:\n%s", w, tail(out, 40))
			}
		}
	}
}

func documentedSteps(mirror string) []step {
	jsonOK := func(field string) func(t *testing.T, out string) {
		return func(t *testing.T, out string) {
			var v map[string]any
			if err := json.Unmarshal([]byte(out), &v); err != nil {
				t.Errorf("output is not JSON: %v\n%s", err, tail(out, 20))
			} else if _, ok := v[field]; !ok {
				t.Errorf("JSON output has no %q field:\n%s", field, tail(out, 20))
			}
		}
	}
	contains := func(want ...string) func(t *testing.T, out string) {
		return func(t *testing.T, out string) {
			for _, w := range want {
				if !strings.Contains(out, w) {
					t.Errorf("output lacks %q:\n%s", w, tail(out, 30))
				}
			}
		}
	}
	return []step{
		{line: "make help", covers: []string{"make help"}, check: contains("smoke", "demo")},
		{line: "make -n smoke", check: contains("bin/drover smoke out/ecs-node.raw --reboot --policy-check --conformance --metadata-errors 0.3 --metadata-delay 2s --metadata-token-ttl 1s --junit out/smoke.xml")},
		{line: "make -n image", check: contains("bin/drover build recipes/ecs-node.yaml -o out")},
		{line: "make -n demo", check: contains("bin/drover run --cluster local --fresh out/ecs-node.raw")},
		{line: "make -n smoke-arm64",
			check: contains("bin/drover build recipes/ecs-node-arm64.yaml -o out", "bin/drover smoke out/ecs-node-arm64.raw --junit out/smoke-arm64.xml")},

		// Re-locks the conformance test images' Debian packages from the
		// signed archive, in this clone; bin/drover keeps the lock it
		// embedded, so nothing later changes.
		{line: "drover conformance --lock-test-images", covers: []string{"drover conformance --lock-test-images"},
			check: contains("harness/conformance/glibc-dns-testing.lock: ", "rebuild drover to embed it")},

		// Diff and verify first, while out/ holds one image (diff reads
		// an output directory's single manifest).
		{line: "mkdir -p old release copy && cp out/ecs-node.manifest.json old/ && ln out/ecs-node.raw old/ && " +
			"cp out/ecs-node.manifest.json release/ && ln out/ecs-node.raw copy/ && cp out/ecs-node.manifest.json main.manifest.json"},
		{line: "drover diff old/ecs-node.raw out/ecs-node.raw", covers: []string{"drover diff old/ecs-node.raw out/ecs-node.raw", "drover diff OLD NEW"}},
		{line: "drover diff --markdown main.manifest.json out/ecs-node.manifest.json > diff.md && test -s diff.md",
			covers: []string{"drover diff --markdown main.manifest.json out/ecs-node.manifest.json > diff.md"}},
		{line: "drover diff --json old/ out/ | jq .packages", covers: []string{"drover diff --json old/ out/ | jq .packages"}},
		{line: "drover verify out/ecs-node.raw", covers: []string{"drover verify out/ecs-node.raw", "drover verify IMAGE"},
			check: contains("out/ecs-node.raw verifies against ecs-node.manifest.json")},
		{line: "drover verify --manifest release/ecs-node.manifest.json copy/ecs-node.raw",
			covers: []string{"drover verify --manifest release/ecs-node.manifest.json /mnt/copy/ecs-node.raw"},
			note:   "copy/ in the clone instead of /mnt/copy: a relative path, nothing written outside the clone"},
		{line: "drover verify --json out/ecs-node.raw", covers: []string{"drover verify --json out/ecs-node.raw"}, check: jsonOK("ok")},
		// A release key, and the image built again with its provenance
		// signed, for the --provenance example.
		{line: "openssl genpkey -algorithm ed25519 -out release.key && openssl pkey -in release.key -pubout -out release.pub && " +
			"drover build recipes/ecs-node.yaml -o out/ --sign-key release.key", check: contains("out/ecs-node.provenance.dsse.json")},
		{line: "drover verify --provenance --pub release.pub out/ecs-node.raw", covers: []string{"drover verify --provenance --pub release.pub out/ecs-node.raw"},
			check: contains("signed provenance and its subjects")},
		{line: "drover verify --provenance --pub release.pub --expect-lock recipes/ecs-node.yaml.lock out/ecs-node.raw",
			covers: []string{"drover verify --provenance --pub release.pub --expect-lock recipes/ecs-node.yaml.lock out/ecs-node.raw"},
			check:  contains("signed provenance and its subjects")},

		// User-data: ca.crt and pool.yaml are written by the test.
		{line: "drover userdata --server https://10.0.0.10:6443 --ca-file ca.crt --token abcdef.0123456789abcdef \\\n" +
			"      --label example.com/pool=workers --taint dedicated=batch:NoSchedule \\\n" +
			"      --mirror docker.io=https://mirror.example.com --base64",
			covers: []string{"drover userdata --server https://10.0.0.10:6443 --ca-file ca.crt --token abcdef.0123456789abcdef " +
				"--label example.com/pool=workers --taint dedicated=batch:NoSchedule --mirror docker.io=https://mirror.example.com --base64",
				"drover userdata --base64", "drover userdata …"},
			check: func(t *testing.T, out string) {
				b, err := base64.StdEncoding.DecodeString(strings.TrimSpace(out))
				if err != nil || !strings.Contains(string(b), `"ignition"`) {
					t.Errorf("--base64 output is not base64 of an Ignition config (%v):\n%s", err, tail(out, 5))
				}
			}},
		{line: "drover userdata --from pool.yaml > userdata.ign", covers: []string{"drover userdata --from pool.yaml > userdata.ign"}},
		{line: "drover validate userdata.ign", covers: []string{"drover validate userdata.ign", "drover validate USERDATA"}},
		{line: "drover userdata --server https://10.0.0.1:6443 --ca-file ca.crt --token abcdef.0123456789abcdef > ud.ign && drover validate ud.ign",
			covers: []string{"drover userdata --server https://10.0.0.1:6443 --ca-file ca.crt --token abcdef.0123456789abcdef > ud.ign && drover validate ud.ign"}},

		// Lock, fetch, build.
		{line: "drover lock recipes/ecs-node.yaml", covers: []string{"drover lock recipes/ecs-node.yaml", "drover lock RECIPE"}},
		// Re-resolves every package; the fetch below checks the result
		// against the signed indexes.
		{line: "drover lock --refresh recipes/ecs-node.yaml", covers: []string{"drover lock --refresh recipes/ecs-node.yaml", "drover lock --refresh"}},
		{line: "DROVER_MIRROR=" + mirror + " drover lock recipes/ecs-node.yaml",
			covers: []string{"DROVER_MIRROR=http://mirror.example/debian drover lock recipes/ecs-node.yaml"},
			note:   "the build host's own mirror (drover mirror) instead of the placeholder"},
		{line: "drover lock --explain recipes/minimal.yaml", covers: []string{"drover lock --explain recipes/minimal.yaml", "drover lock --explain"}},
		{line: "drover sources recipes/minimal.yaml", covers: []string{"drover sources"}},
		{line: "drover fetch recipes/ecs-node.yaml", covers: []string{"drover fetch RECIPE"}, check: contains("verified in the cache")},
		// After the lock: the clone's lock is then current but for what
		// was published in the minutes between, so 1 is an answer too.
		{line: "drover outdated recipes/ecs-node.yaml; test $? -le 1", covers: []string{"drover outdated recipes/ecs-node.yaml", "drover outdated RECIPE", "drover outdated"},
			note: "exit 1 (something published since the lock step) is an answer, not a failure", check: contains("recipes/ecs-node.yaml.lock is ")},
		{line: "drover outdated --security-only recipes/ecs-node.yaml || drover lock recipes/ecs-node.yaml",
			covers: []string{"drover outdated --security-only recipes/ecs-node.yaml || drover lock recipes/ecs-node.yaml"}},
		{line: "drover outdated --json recipes/ecs-node.yaml | jq '.packages[] | select(.security)'",
			covers: []string{"drover outdated --json recipes/ecs-node.yaml | jq '.packages[] | select(.security)'"}},
		{line: "drover build --plan recipes/minimal.yaml", covers: []string{"drover build --plan recipes/minimal.yaml", "drover build --plan"}},
		{line: "drover build recipes/minimal.yaml -o out/", covers: []string{"drover build RECIPE -o out/", "drover build"}, check: contains("out/minimal.raw")},

		// Boots: Ctrl-C once the kernel runs; the --until example to the end.
		{line: "drover run out/minimal.raw", covers: []string{"drover run out/minimal.raw"}, until: "Linux version"},
		{line: "drover run out/ecs-node.raw", covers: []string{"drover run out/ecs-node.raw"}, until: "Linux version"},
		{line: "drover run --nvme --timeout 10m --until 'Reached target multi-user.target' out/minimal.raw",
			covers: []string{"drover run --nvme --timeout 10m --until 'Reached target multi-user.target' out/minimal.raw"},
			check:  contains("Reached target multi-user.target")},

		// Last, as it re-pins the clone's lock to another toolchain (which
		// later builds would then fetch and use); the lock is restored after.
		{line: "drover lock --toolchain go1.27.3 recipes/ecs-node.yaml && grep -x 'toolchain go1.27.3' recipes/ecs-node.yaml.lock && git checkout -q recipes/ecs-node.yaml.lock",
			covers: []string{"drover lock --toolchain go1.27.3 recipes/ecs-node.yaml"},
			note:   "then checks the lock's toolchain line and restores the lock", check: contains("toolchain go1.27.3")},
	}
}

// documented collects the commands README.md and every --help show.
func documented(t *testing.T, c *clone) []string {
	readme, err := os.ReadFile(c.path("README.md"))
	if err != nil {
		t.Fatal(err)
	}
	var cmds []string
	for _, m := range regexp.MustCompile("`((?:drover|make) [^`]+)`").FindAllStringSubmatch(string(readme), -1) {
		cmds = append(cmds, m[1])
	}
	inBlock := false
	for _, l := range strings.Split(string(readme), "\n") {
		if strings.HasPrefix(l, "```") {
			inBlock = !inBlock
			continue
		}
		if l = strings.TrimSpace(strings.SplitN(l, "#", 2)[0]); inBlock && (strings.HasPrefix(l, "drover ") || strings.HasPrefix(l, "make ")) {
			cmds = append(cmds, l)
		}
	}
	help := func(args ...string) string {
		out, code := c.sh(t, time.Minute, "drover "+strings.Join(args, " ")+" --help")
		if code != 0 {
			t.Fatalf("drover %v --help: exit %d\n%s", args, code, out)
		}
		return out
	}
	root := help()
	// The root's description shows a typical pipeline.
	const pipeline = "A typical pipeline:\n"
	i := strings.Index(root, pipeline)
	if i < 0 {
		t.Fatalf("drover --help shows no %q", pipeline)
	}
	block := root[i+len(pipeline):]
	for _, l := range strings.Split(block[:strings.Index(block, "\n\n")], "\n") {
		cmds = append(cmds, strings.TrimSpace(strings.SplitN(l, "#", 2)[0]))
	}
	sub := regexp.MustCompile(`(?m)^  ([a-z]+) `)
	list := root[strings.Index(root, "Available Commands:"):strings.Index(root, "Flags:")]
	for _, m := range sub.FindAllStringSubmatch(list, -1) {
		if m[1] == "help" || m[1] == "completion" {
			continue
		}
		text := help(m[1])
		i := strings.Index(text, "Examples:\n")
		if i < 0 {
			continue
		}
		block := text[i+len("Examples:\n"):]
		block = block[:strings.Index(block, "\n\n")]
		block = strings.ReplaceAll(block, "\\\n", " ")
		for _, l := range strings.Split(block, "\n") {
			cmds = append(cmds, strings.Join(strings.Fields(l), " "))
		}
	}
	return cmds
}

func documentedCommands(t *testing.T, c *clone) {
	writeTestCA(t, c.path("ca.crt"))
	if err := os.WriteFile(c.path("pool.yaml"), []byte("server: https://10.0.0.10:6443\ncaFile: ca.crt\n"+
		"bootstrapToken: abcdef.0123456789abcdef\nlabels:\n  example.com/pool: workers\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	mirror, code := c.sh(t, time.Minute, "drover mirror")
	if code != 0 {
		t.Fatalf("drover mirror: exit %d: %s", code, mirror)
	}
	steps := documentedSteps(strings.TrimSpace(mirror))
	covered := map[string]bool{}
	for _, s := range steps {
		for _, d := range s.covers {
			covered[d] = true
		}
	}
	var uncovered []string
	for _, d := range documented(t, c) {
		if _, ok := byEarlierTests[d]; ok || covered[d] {
			continue
		}
		if why, ok := notRun[d]; ok {
			t.Logf("not run: %s (%s)", d, why)
			continue
		}
		uncovered = append(uncovered, d)
	}
	for _, s := range steps {
		start := time.Now()
		var out string
		if s.until != "" {
			until := s.until
			out = c.interactive(t, 10*time.Minute, s.line, func(l string) bool { return strings.Contains(l, until) })
		} else {
			var code int
			out, code = c.sh(t, 30*time.Minute, s.line)
			if code != s.exit {
				t.Errorf("$ %s: exit %d, want %d\n%s", s.line, code, s.exit, tail(out, 40))
				continue
			}
		}
		if s.check != nil {
			s.check(t, out)
		}
		if s.note != "" {
			t.Logf("  (%s)", s.note)
		}
		t.Logf("  step took %s", time.Since(start).Round(time.Second))
	}
	// Named after the steps, so that they are in the tail of the log
	// (all CI shows of it).
	for _, d := range uncovered {
		t.Errorf("documented command %q is run by no test: add a step to documentedSteps (e2e/documented_test.go) or a reason to notRun", d)
	}
}

// writeTestCA writes a self-signed CA certificate (PEM), as a cluster's.
func writeTestCA(t *testing.T, path string) {
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	tmpl := &x509.Certificate{SerialNumber: big.NewInt(1), Subject: pkix.Name{CommonName: "drover e2e CA"},
		NotBefore: time.Now().Add(-time.Hour), NotAfter: time.Now().Add(24 * time.Hour),
		IsCA: true, BasicConstraintsValid: true, KeyUsage: x509.KeyUsageCertSign}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, tmpl, &key.PublicKey, key)
	if err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(path, pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: der}), 0o644); err != nil {
		t.Fatal(err)
	}
}
