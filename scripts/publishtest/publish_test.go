//go:build integration

package publishtest

import (
	"bytes"
	"errors"
	"flag"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
)

var update = flag.Bool("update", false, "rewrite the golden files in testdata/")

// secret stands in for a credential in the environment: the script must never
// echo it, whatever happens.
const secret = "ALIBABA-SECRET-must-not-appear"

// fakeAliyun records its argv (fields split by 0x1f, calls ended by 0x1e) and
// answers like the CLI: ImportImage and CopyImage return an ImageId, and
// DescribeImages reports Creating, then Available (FAKE_MODE=stuck: always
// Creating; FAKE_MODE=fail: CreateFailed).
const fakeAliyun = `
printf '%s\x1f' aliyun "$@" >>"$FAKE_DIR/calls"
printf '\x1e' >>"$FAKE_DIR/calls"
id="" prev=""
for a in "$@"; do
	[ "$prev" = --ImageId ] && id=$a
	prev=$a
done
case $2 in
ImportImage) printf '{"RequestId":"req-1","ImageId":"m-test123","ImportTaskId":"t-1","RegionId":"cn-hangzhou"}\n' ;;
CopyImage) printf '{"RequestId":"req-2","ImageId":"m-copy123"}\n' ;;
DescribeImages)
	n=0
	[ -f "$FAKE_DIR/polls-$id" ] && read -r n <"$FAKE_DIR/polls-$id"
	n=$((n + 1))
	echo "$n" >"$FAKE_DIR/polls-$id"
	status=Available
	case ${FAKE_MODE:-} in
	stuck) status=Creating ;;
	fail) status=CreateFailed ;;
	*) [ "$n" -ge 2 ] || status=Creating ;;
	esac
	printf '{"RequestId":"req-3","TotalCount":1,"Images":{"Image":[{"ImageId":"%s","Status":"%s","Progress":"%d%%"}]}}\n' "$id" "$status" $((n * 50)) ;;
TagResources) printf '{"RequestId":"req-4"}\n' ;;
*) echo "fake aliyun: unexpected call: $*" >&2; exit 3 ;;
esac
`

// fakeOssutil records its argv and chatters on stdout, as ossutil does: that
// must not reach publish-ecs's stdout, which carries only the ImageId.
const fakeOssutil = `
printf '%s\x1f' ossutil "$@" >>"$FAKE_DIR/calls"
printf '\x1e' >>"$FAKE_DIR/calls"
echo "0.123456(s) elapsed"
`

type harness struct {
	bash, script string
	work         string // holds ecs-node.qcow2 and its manifest
	tools        string // bash, jq and sleep only: no aliyun, no ossutil
	fakes        string // fake aliyun and ossutil
}

func need(t *testing.T, tool, pkg string) string {
	t.Helper()
	p, err := exec.LookPath(tool)
	if err != nil {
		t.Fatalf("%s not found: install the Debian package %s (apt-get install %s)", tool, pkg, pkg)
	}
	return p
}

func newHarness(t *testing.T) *harness {
	t.Helper()
	h := &harness{bash: need(t, "bash", "bash"), work: t.TempDir(), tools: t.TempDir(), fakes: t.TempDir()}
	for tool, pkg := range map[string]string{"bash": "bash", "jq": "jq", "sleep": "coreutils"} {
		if err := os.Symlink(need(t, tool, pkg), filepath.Join(h.tools, tool)); err != nil {
			t.Fatal(err)
		}
	}
	script, err := filepath.Abs("../publish-ecs.sh")
	if err != nil {
		t.Fatal(err)
	}
	h.script = script
	man, err := os.ReadFile("testdata/ecs-node.manifest.json")
	if err != nil {
		t.Fatal(err)
	}
	h.write(t, "ecs-node.manifest.json", string(man))
	h.write(t, "ecs-node.qcow2", "QFI\xfb not really a qcow2")
	for name, body := range map[string]string{"aliyun": fakeAliyun, "ossutil": fakeOssutil} {
		if err := os.WriteFile(filepath.Join(h.fakes, name), []byte("#!"+h.bash+"\n"+body), 0o755); err != nil {
			t.Fatal(err)
		}
	}
	return h
}

func (h *harness) write(t *testing.T, name, data string) {
	t.Helper()
	if err := os.WriteFile(filepath.Join(h.work, name), []byte(data), 0o644); err != nil {
		t.Fatal(err)
	}
}

type result struct {
	stdout, stderr string
	code           int
}

// run runs the script in the work directory with exactly the tools on path.
func (h *harness) run(t *testing.T, path string, env []string, args ...string) result {
	t.Helper()
	cmd := exec.Command(h.bash, append([]string{h.script}, args...)...)
	cmd.Dir = h.work
	cmd.Env = append([]string{"PATH=" + path, "HOME=" + h.work, "LC_ALL=C", "FAKE_DIR=" + h.fakes,
		"ALIBABA_CLOUD_ACCESS_KEY_SECRET=" + secret}, env...)
	var stdout, stderr bytes.Buffer
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	err := cmd.Run()
	var exit *exec.ExitError
	r := result{stdout: stdout.String(), stderr: stderr.String()}
	switch {
	case errors.As(err, &exit):
		r.code = exit.ExitCode()
	case err != nil:
		t.Fatalf("running %s: %v", h.script, err)
	}
	if strings.Contains(r.stdout+r.stderr, secret) {
		t.Fatalf("the script printed the credential from its environment:\n%s%s", r.stdout, r.stderr)
	}
	return r
}

// calls reads what the fakes recorded, one command line per call, quoted the
// way the script prints them in a dry run.
func (h *harness) calls(t *testing.T) []string {
	t.Helper()
	b, err := os.ReadFile(filepath.Join(h.fakes, "calls"))
	if errors.Is(err, os.ErrNotExist) {
		return nil
	}
	if err != nil {
		t.Fatal(err)
	}
	var out []string
	for _, c := range strings.Split(strings.TrimSuffix(string(b), "\x1e"), "\x1e") {
		args := strings.Split(strings.TrimSuffix(c, "\x1f"), "\x1f")
		for i, a := range args {
			args[i] = quote(a)
		}
		out = append(out, strings.Join(args, " "))
	}
	return out
}

var bare = regexp.MustCompile(`^[A-Za-z0-9_./:=,@+%-]+$`)

// quote mirrors the script's quote(): bare words stay bare, anything else is
// single-quoted.
func quote(s string) string {
	if bare.MatchString(s) {
		return s
	}
	return "'" + strings.ReplaceAll(s, "'", `'\''`) + "'"
}

func golden(t *testing.T, name, got string) {
	t.Helper()
	p := filepath.Join("testdata", name)
	if *update {
		if err := os.WriteFile(p, []byte(got), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	want, err := os.ReadFile(p)
	if err != nil {
		t.Fatalf("%v (run go test -tags integration ./scripts/publishtest -update to create it)", err)
	}
	if got != string(want) {
		t.Errorf("%s differs (run with -update to accept):\n--- got\n%s--- want\n%s", p, got, want)
	}
}

var baseArgs = []string{"--image", "ecs-node.qcow2", "--region", "cn-hangzhou", "--bucket", "drover-images"}

func TestPublish(t *testing.T) {
	for _, tc := range []struct {
		name   string
		args   []string
		stdout string
	}{
		{"single", nil, "m-test123\n"},
		{"copy", []string{"--copy-to", "cn-shanghai"}, "m-test123\ncn-shanghai m-copy123\n"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			h := newHarness(t)
			args := append(append([]string{}, baseArgs...), tc.args...)

			// A dry run needs neither aliyun nor ossutil: PATH holds neither.
			dry := h.run(t, h.tools, nil, append(args, "--dry-run")...)
			if dry.code != 0 {
				t.Fatalf("dry run: exit %d\n%s", dry.code, dry.stderr)
			}
			golden(t, "dry-run-"+tc.name+".golden", dry.stdout)
			if c := h.calls(t); c != nil {
				t.Fatalf("dry run ran commands: %q", c)
			}

			real := h.run(t, h.fakes+":"+h.tools, nil, append(args, "--poll-interval", "0")...)
			if real.code != 0 {
				t.Fatalf("publish: exit %d\n%s", real.code, real.stderr)
			}
			if real.stdout != tc.stdout {
				t.Errorf("stdout = %q, want %q (stderr:\n%s)", real.stdout, tc.stdout, real.stderr)
			}
			calls := h.calls(t)
			golden(t, "fake-"+tc.name+".golden", strings.Join(calls, "\n")+"\n")

			// The dry run shows exactly what a real run does, bar the image IDs it
			// cannot know and the repeats of a wait.
			var collapsed []string
			for i, c := range calls {
				if i == 0 || c != calls[i-1] {
					collapsed = append(collapsed, c)
				}
			}
			planned := strings.NewReplacer("DRY-RUN-IMAGE-ID-cn-shanghai", "m-copy123", "DRY-RUN-IMAGE-ID", "m-test123").Replace(dry.stdout)
			if got := strings.Join(collapsed, "\n") + "\n"; got != planned {
				t.Errorf("real calls differ from the dry run:\n--- real\n%s--- dry run\n%s", got, planned)
			}
			if !strings.Contains(real.stderr, "m-test123 in cn-hangzhou: Creating 50%") {
				t.Errorf("no progress line on stderr:\n%s", real.stderr)
			}
		})
	}
}

func TestRefusesWithoutTools(t *testing.T) {
	h := newHarness(t)
	r := h.run(t, h.tools, nil, baseArgs...)
	if r.code != 1 {
		t.Fatalf("exit %d without aliyun and ossutil, want 1:\n%s%s", r.code, r.stdout, r.stderr)
	}
	for _, want := range []string{
		"aliyun CLI not found: install it from https://github.com/aliyun/aliyun-cli/releases and run `aliyun configure`",
		"ossutil not found: install it from",
	} {
		if !strings.Contains(r.stderr, want) {
			t.Errorf("stderr lacks %q:\n%s", want, r.stderr)
		}
	}
	if r.stdout != "" {
		t.Errorf("stdout = %q, want nothing", r.stdout)
	}
}

func TestImportFailures(t *testing.T) {
	for _, tc := range []struct {
		mode, want string
		args       []string
	}{
		{"fail", "image m-test123 in cn-hangzhou is CreateFailed", nil},
		{"stuck", "image m-test123 in cn-hangzhou still Creating when --wait-timeout 0 ran out", []string{"--wait-timeout", "0"}},
	} {
		t.Run(tc.mode, func(t *testing.T) {
			h := newHarness(t)
			r := h.run(t, h.fakes+":"+h.tools, []string{"FAKE_MODE=" + tc.mode}, append(append([]string{}, baseArgs...), tc.args...)...)
			if r.code != 1 {
				t.Fatalf("exit %d, want 1\n%s", r.code, r.stderr)
			}
			if !strings.Contains(r.stderr, tc.want) {
				t.Errorf("stderr lacks %q:\n%s", tc.want, r.stderr)
			}
			if r.stdout != "" {
				t.Errorf("stdout = %q, want nothing: a failed import has no ImageId to hand on", r.stdout)
			}
			for _, c := range h.calls(t) {
				if strings.Contains(c, "TagResources") {
					t.Errorf("tagged an image that never became Available: %s", c)
				}
			}
		})
	}
}

func TestRejectsBadArguments(t *testing.T) {
	for _, tc := range []struct {
		args []string
		code int
		want string
	}{
		{[]string{"--region", "CN"}, 2, "--region CN: not a region ID"},
		{[]string{"--bucket", "Bad_Bucket"}, 2, "OSS bucket names are 3-63"},
		{[]string{"--boot-mode", "BIOS"}, 2, "drover images boot by UEFI only"},
		{[]string{"--copy-to", "cn-hangzhou"}, 2, "that is the import region itself"},
		{[]string{"--wait-timeout", "5x"}, 2, "--wait-timeout 5x"},
		{[]string{"--image-name", "1bad"}, 2, "ECS wants 2-128 letters"},
		{[]string{"--image", "ecs-node.iso"}, 2, "want a .qcow2, .raw or .vhd file"},
		{[]string{"--image", "missing.qcow2"}, 1, "image missing.qcow2 not found"},
		{[]string{"--frobnicate"}, 2, "unknown argument --frobnicate"},
	} {
		t.Run(strings.Join(tc.args, " "), func(t *testing.T) {
			h := newHarness(t)
			args := append(append([]string{"--dry-run"}, baseArgs...), tc.args...)
			r := h.run(t, h.tools, nil, args...)
			if r.code != tc.code || !strings.Contains(r.stderr, tc.want) {
				t.Errorf("exit %d, want %d with %q; stderr:\n%s", r.code, tc.code, tc.want, r.stderr)
			}
			if r.stdout != "" {
				t.Errorf("printed commands before rejecting its arguments:\n%s", r.stdout)
			}
		})
	}
}

func TestManifestDrivesSizeAndName(t *testing.T) {
	h := newHarness(t)
	// 40 GiB and one byte: ECS wants whole GiB, rounded up.
	h.write(t, "big.manifest.json", `{"name":"big","version":"1.2","rootHash":"00ff","buildID":"b1","diskSize":42949672961}`)
	h.write(t, "big.raw", "raw")
	r := h.run(t, h.tools, nil, "--dry-run", "--image", "big.raw", "--region", "cn-beijing", "--bucket", "b-1",
		"--object-prefix", "images/nodes", "--platform", "Others Linux")
	if r.code != 1 || !strings.Contains(r.stderr, `rootHash 00ff is not hex`) {
		t.Fatalf("a 4-digit root hash was accepted (exit %d):\n%s", r.code, r.stderr)
	}
	h.write(t, "big.manifest.json", `{"name":"big","version":"1.2","rootHash":"`+strings.Repeat("ab", 32)+`","buildID":"b1","diskSize":42949672961}`)
	r = h.run(t, h.tools, nil, "--dry-run", "--image", "big.raw", "--region", "cn-beijing", "--bucket", "b-1",
		"--object-prefix", "images/nodes", "--platform", "Others Linux")
	if r.code != 0 {
		t.Fatalf("exit %d\n%s", r.code, r.stderr)
	}
	for _, want := range []string{
		"ossutil cp -f big.raw oss://b-1/images/nodes/big-1.2.raw\n",
		"--ImageName big-1.2 ",
		"--Platform 'Others Linux' ",
		"--DiskDeviceMapping.1.OSSObject images/nodes/big-1.2.raw --DiskDeviceMapping.1.Format RAW --DiskDeviceMapping.1.DiskImageSize 41 ",
	} {
		if !strings.Contains(r.stdout, want) {
			t.Errorf("dry run lacks %q:\n%s", want, r.stdout)
		}
	}
	h.write(t, "big.manifest.json", `{"name":"big","version":"1.2"}`)
	r = h.run(t, h.tools, nil, "--dry-run", "--image", "big.raw", "--region", "cn-beijing", "--bucket", "b-1")
	if r.code != 1 || !strings.Contains(r.stderr, `field "rootHash" missing or empty`) {
		t.Errorf("exit %d, want 1 naming rootHash:\n%s", r.code, r.stderr)
	}
}

func TestShellcheck(t *testing.T) {
	out, err := exec.Command(need(t, "shellcheck", "shellcheck"), "../publish-ecs.sh").CombinedOutput()
	if err != nil {
		t.Errorf("shellcheck scripts/publish-ecs.sh: %v\n%s", err, out)
	}
}

// TestSecureBootFlag: --secure-boot needs a manifest whose systemd-boot and
// UKI are signed, and tags the image drover:secure-boot=signed.
func TestSecureBootFlag(t *testing.T) {
	h := newHarness(t)
	args := append([]string{"--dry-run", "--secure-boot"}, baseArgs...)
	r := h.run(t, h.tools, nil, args...)
	if r.code != 1 || !strings.Contains(r.stderr, "--secure-boot: EFI/BOOT/BOOTX64.EFI is not signed") {
		t.Fatalf("unsigned manifest: exit %d, want 1 naming the unsigned boot loader:\n%s", r.code, r.stderr)
	}
	if r.stdout != "" {
		t.Errorf("printed commands before refusing:\n%s", r.stdout)
	}
	man, _ := os.ReadFile("testdata/ecs-node.manifest.json")
	signed := strings.Replace(string(man), `"rootHash"`, `"esp": [{"path": "EFI/BOOT/BOOTX64.EFI", "signedBy": "O=Test (sha256 ab)"}, {"path": "EFI/Linux/drover.efi", "signedBy": "O=Test (sha256 ab)"}], "rootHash"`, 1)
	h.write(t, "ecs-node.manifest.json", signed)
	r = h.run(t, h.tools, nil, args...)
	if r.code != 0 {
		t.Fatalf("signed manifest: exit %d\n%s", r.code, r.stderr)
	}
	if !strings.Contains(r.stdout, "--Tag.5.Key drover:secure-boot --Tag.5.Value signed\n") {
		t.Errorf("no secure-boot tag:\n%s", r.stdout)
	}
}

func TestDiskImageSizeLimit(t *testing.T) {
	h := newHarness(t)
	h.write(t, "huge.manifest.json", `{"name":"huge","version":"1","rootHash":"`+strings.Repeat("ab", 32)+`","buildID":"b1","diskSize":`+"2200000000000"+`}`)
	h.write(t, "huge.raw", "raw")
	r := h.run(t, h.tools, nil, "--dry-run", "--image", "huge.raw", "--region", "cn-beijing", "--bucket", "b-1")
	if r.code != 1 || !strings.Contains(r.stderr, "DiskImageSize of at most 2048 GiB") {
		t.Errorf("a 2049 GiB image: exit %d, want 1:\n%s", r.code, r.stderr)
	}
}

// TestArchitectureFromManifest: the manifest's arch picks ImportImage's
// Architecture (arm64 → arm64, amd64 or none → x86_64), a contradicting
// --architecture is refused, and --secure-boot checks the architecture's
// own removable-media boot loader.
func TestArchitectureFromManifest(t *testing.T) {
	man, err := os.ReadFile("testdata/ecs-node.manifest.json")
	if err != nil {
		t.Fatal(err)
	}
	withArch := func(arch, extra string) string {
		return strings.Replace(string(man), `"rootHash"`, `"arch": "`+arch+`", `+extra+`"rootHash"`, 1)
	}
	h := newHarness(t)
	for _, tc := range []struct{ manifest, want string }{
		{string(man), "--Architecture x86_64 "},
		{withArch("amd64", ""), "--Architecture x86_64 "},
		{withArch("arm64", ""), "--Architecture arm64 "},
	} {
		h.write(t, "ecs-node.manifest.json", tc.manifest)
		r := h.run(t, h.tools, nil, append([]string{"--dry-run"}, baseArgs...)...)
		if r.code != 0 || !strings.Contains(r.stdout, tc.want+"--OSType linux --Platform Debian --BootMode UEFI ") {
			t.Errorf("exit %d, want an ImportImage with %q, UEFI:\n%s%s", r.code, tc.want, r.stdout, r.stderr)
		}
	}
	// A real run against the fake API imports it as arm64 too.
	h.write(t, "ecs-node.manifest.json", withArch("arm64", ""))
	real := h.run(t, h.fakes+":"+h.tools, nil, append(append([]string{}, baseArgs...), "--poll-interval", "0")...)
	if real.code != 0 || real.stdout != "m-test123\n" {
		t.Fatalf("arm64 publish: exit %d, stdout %q\n%s", real.code, real.stdout, real.stderr)
	}
	imported := false
	for _, c := range h.calls(t) {
		if strings.HasPrefix(c, "aliyun ecs ImportImage ") {
			imported = strings.Contains(c, " --Architecture arm64 ") && strings.Contains(c, " --BootMode UEFI ")
		}
	}
	if !imported {
		t.Errorf("the fake API saw no ImportImage with --Architecture arm64 --BootMode UEFI: %q", h.calls(t))
	}

	for _, tc := range []struct {
		manifest string
		args     []string
		code     int
		want     string
	}{
		{withArch("arm64", ""), []string{"--architecture", "x86_64"}, 2, "--architecture x86_64: ecs-node.manifest.json is an arm64 image (arm64)"},
		{withArch("amd64", ""), []string{"--architecture", "arm64"}, 2, "is an amd64 image (x86_64)"},
		{withArch("riscv64", ""), nil, 1, "arch riscv64 is neither amd64 nor arm64"},
		// An arm64 image's systemd-boot is BOOTAA64.EFI: a signed BOOTX64.EFI does not count.
		{withArch("arm64", `"esp": [{"path": "EFI/BOOT/BOOTX64.EFI", "signedBy": "O=Test"}, {"path": "EFI/Linux/drover.efi", "signedBy": "O=Test"}], `),
			[]string{"--secure-boot"}, 1, "--secure-boot: EFI/BOOT/BOOTAA64.EFI is not signed"},
		{withArch("arm64", `"esp": [{"path": "EFI/BOOT/BOOTAA64.EFI", "signedBy": "O=Test"}, {"path": "EFI/Linux/drover.efi", "signedBy": "O=Test"}], `),
			[]string{"--secure-boot"}, 0, "--Architecture arm64 "},
	} {
		h.write(t, "ecs-node.manifest.json", tc.manifest)
		r := h.run(t, h.tools, nil, append(append([]string{"--dry-run"}, baseArgs...), tc.args...)...)
		if r.code != tc.code || !strings.Contains(r.stderr+r.stdout, tc.want) {
			t.Errorf("%v: exit %d, want %d with %q:\n%s%s", tc.args, r.code, tc.code, tc.want, r.stdout, r.stderr)
		}
	}
}
