//go:build e2e

package e2e

import (
	"bytes"
	"context"
	"encoding/base64"
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/drover-os/drover/harness/qemu"
	"github.com/drover-os/drover/harness/smoke"
	"github.com/drover-os/drover/image/arch"
	"github.com/drover-os/drover/image/build"
	"github.com/drover-os/drover/image/diff"
	"github.com/drover-os/drover/image/esp"
)

// loaderPath is systemd-boot's place on the ESP of the amd64 images the
// Secure Boot tests build.
var loaderPath = arch.AMD64.RemovableMediaPath()

// secureBootRecipe is recipes/minimal.yaml with the agent enabled, so a
// status file records what drover-init found, and SBAT generation
// sbatGeneration, with the shipped lock (units and the SBAT generation do
// not change the lock's inputs).
func secureBootRecipe(t *testing.T, dir string) string {
	src, err := os.ReadFile(filepath.Join(repo, "recipes", "minimal.yaml"))
	if err != nil {
		t.Fatal(err)
	}
	lock, err := os.ReadFile(filepath.Join(repo, "recipes", "minimal.yaml.lock"))
	if err != nil {
		t.Fatal(err)
	}
	text := strings.Replace(string(src), "units:\n", "units:\n  enable: [drover-agent.service]\n", 1) +
		fmt.Sprintf("secureBoot:\n  sbatGeneration: %d\n", sbatGeneration)
	p := filepath.Join(dir, "minimal.yaml")
	if err := os.WriteFile(p, []byte(text), 0o644); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(p+".lock", lock, 0o644); err != nil {
		t.Fatal(err)
	}
	return p
}

// sbatGeneration is the SBAT generation the Secure Boot tests' recipe
// sets: not the default, so that the UKI's line shows the recipe's.
const sbatGeneration = 3

// TestSecureBoot builds the minimal image unsigned and signed with
// Debian's OVMF snakeoil key, checks the signatures with sbverify and the
// UKI with objdump and objcopy (sections, .cmdline, the SBAT line), and
// boots under Secure Boot (OVMF secboot firmware, snakeoil db): the signed
// image reaches multi-user.target with Secure Boot on and imports no
// system credential from SMBIOS or fw_cfg; with noefi and another word
// appended through SMBIOS it stops in drover-init; a copy with one byte of
// the UKI's .cmdline changed and the unsigned image are refused by the
// firmware before any kernel runs.
//
// SBAT is checked in the UKI, not at boot: OVMF and systemd-boot do not
// enforce SBAT (only shim does, against its SbatLevel variable), so no
// firmware here refuses a UKI below a generation floor.
func TestSecureBoot(t *testing.T) {
	work := t.TempDir()
	recipe := secureBootRecipe(t, work)
	cache := filepath.Join(work, "cache")
	// The snakeoil key is encrypted ("snakeoil", ovmf's README.Debian);
	// drover takes only unencrypted keys.
	key, cert := filepath.Join(work, "db.key"), qemu.SnakeoilCert
	run(t, "openssl", "pkcs8", "-in", qemu.SnakeoilKey, "-passin", "pass:snakeoil", "-out", key)

	build := func(out string, signed bool) string {
		args := []string{"build", recipe, "-o", out, "--cache", cache, "--agent", bin("drover-agent"), "--init", bin("drover-init")}
		if signed {
			args = append(args, "--secure-boot-key", key, "--secure-boot-cert", cert)
		}
		run(t, bin("drover"), args...)
		return filepath.Join(out, "minimal.raw")
	}
	unsigned := build(filepath.Join(work, "unsigned"), false)
	signed := build(filepath.Join(work, "signed"), true)
	signedAgain := build(filepath.Join(work, "signed-again"), true)
	if a, b := fileSHA(t, signed), fileSHA(t, signedAgain); a != b {
		t.Fatalf("two signed builds differ: %s vs %s", a, b)
	}
	t.Logf("reproducible: signed minimal.raw sha256 %s", fileSHA(t, signed))

	mf := readManifest(t, filepath.Join(work, "signed", "minimal.manifest.json"))
	files := espFiles(t, signed, mf, loaderPath, esp.UKIPath)
	t.Run("sbverify", func(t *testing.T) {
		for _, name := range []string{loaderPath, esp.UKIPath} {
			t.Log(run(t, "sbverify", "--cert", cert, files[name]))
		}
		unsignedUKI := espFiles(t, unsigned, readManifest(t, filepath.Join(work, "unsigned", "minimal.manifest.json")), esp.UKIPath)[esp.UKIPath]
		if out, err := exec.Command("sbverify", "--cert", cert, unsignedUKI).CombinedOutput(); err == nil {
			t.Errorf("sbverify accepts the unsigned build's UKI:\n%s", out)
		}
	})
	t.Run("objdump", func(t *testing.T) { checkUKISections(t, files[esp.UKIPath], mf) })
	t.Run("sbat", func(t *testing.T) { checkSBAT(t, files[esp.UKIPath], mf) })
	t.Run("initrd holds the signed cmdline", func(t *testing.T) {
		// What drover-init compares /proc/cmdline with, inside the signed
		// UKI, and its word that the UKI is signed.
		uki := espFile(t, signed, mf, esp.UKIPath)
		cfg := initrdConfig(t, ukiSection(t, uki, ".initrd"))
		if cfg.Cmdline != mf.Cmdline || !cfg.SignedUKI {
			t.Errorf("the initrd's config has cmdline %q, signed UKI %v; the UKI's .cmdline is %q and it is signed", cfg.Cmdline, cfg.SignedUKI, mf.Cmdline)
		}
		unsignedMf := readManifest(t, filepath.Join(work, "unsigned", "minimal.manifest.json"))
		if cfg := initrdConfig(t, ukiSection(t, espFile(t, unsigned, unsignedMf, esp.UKIPath), ".initrd")); cfg.SignedUKI {
			t.Error("the unsigned build's initrd says its UKI is signed")
		}
		// Every build turns off systemd's credential import.
		if !slices.Contains(strings.Fields(mf.Cmdline), "systemd.import_credentials=no") {
			t.Errorf("the UKI's command line %q lacks systemd.import_credentials=no", mf.Cmdline)
		}
	})
	t.Run("diff unsigned signed", func(t *testing.T) { diffNamesBootFilesOnly(t, unsigned, signed) })

	t.Run("boot signed", func(t *testing.T) {
		start := time.Now()
		// User-data over fw_cfg makes the agent run (QEMU provider); it
		// records Secure Boot before its first phase, whatever follows.
		ign := filepath.Join(work, "config.ign")
		if err := os.WriteFile(ign, []byte(`{"ignition":{"version":"3.4.0"}}`), 0o644); err != nil {
			t.Fatal(err)
		}
		// System credentials through SMBIOS and fw_cfg, each a tmpfiles
		// line writing a marker on the persistent /var (systemd-tmpfiles-
		// setup imports tmpfiles.* and applies tmpfiles.extra). Imported,
		// the marker would be on the disk after the boot.
		fwcfgCred := filepath.Join(work, "fwcfg-tmpfiles.extra")
		if err := os.WriteFile(fwcfgCred, []byte(credentialLine(markerFwCfg)), 0o644); err != nil {
			t.Fatal(err)
		}
		c := &qemu.Config{Image: signed, StateDir: filepath.Join(work, "vm-signed"), SecureBoot: true, DiskSize: 2 << 30,
			FwCfg:     map[string]string{"opt/drover/userdata": ign, "opt/io.systemd.credentials/tmpfiles.extra": fwcfgCred},
			ExtraArgs: []string{"-smbios", "type=11,value=io.systemd.credential.binary:tmpfiles.extra=" + base64.StdEncoding.EncodeToString([]byte(credentialLine(markerSMBIOS)))}}
		vm := startVM(t, c)
		defer vm.Stop()
		ctx, cancel := context.WithTimeout(t.Context(), 15*time.Minute)
		defer cancel()
		if _, err := vm.WaitFor(ctx, "Reached target multi-user.target"); err != nil {
			t.Fatalf("%v\n%s", err, tail(vm.Log(), 60))
		}
		// Only a sync point: the evidence is the status file on the disk.
		if _, err := vm.WaitFor(ctx, "] secure boot "); err != nil {
			t.Fatalf("the agent recorded no Secure Boot state: %v\n%s", err, grepLines(vm.Log(), "drover-"))
		}
		// The minimal image has no logind to act on the power button; give
		// ext4 its 5-second journal commit, then stop QEMU (which flushes
		// the disk).
		time.Sleep(15 * time.Second)
		vm.Stop()
		t.Logf("signed image booted under Secure Boot in %s", time.Since(start).Round(time.Second))
		log := vm.Log()
		// The kernel's own finding, from the firmware it booted on.
		if !strings.Contains(log, "secureboot: Secure boot enabled") {
			t.Errorf("the kernel did not report Secure Boot enabled:\n%s", grepLines(log, "ecure"))
		}
		// drover-init compared the kernel's command line with the signed
		// one and found them equal (else it would have stopped the boot).
		if !strings.Contains(log, "drover-init: signed-cmdline (") || strings.Contains(log, "not the signed one") {
			t.Errorf("drover-init's signed-cmdline step did not run, or complained:\n%s", grepLines(log, "drover-init: s", "signed one"))
		}
		st, err := smoke.ReadStatus(t.Context(), c)
		if err != nil {
			t.Fatal(err)
		}
		if st.SecureBoot == nil || !*st.SecureBoot || st.SecureBootSource != "EFI variable SecureBoot = 1" || st.SecureBootState != "on" || !st.SignedUKI {
			t.Errorf("status file: secure boot %q (%q), signed UKI %v; want on from the EFI variable, signed", st.SecureBootState, st.SecureBootSource, st.SignedUKI)
		}
		checkNoCredentialMarkers(t, c, log)
	})

	t.Run("boot signed with SMBIOS cmdline extra noefi", func(t *testing.T) { smbiosCmdlineRefused(t, signed, filepath.Join(work, "vm-smbios")) })

	t.Run("boot tampered cmdline", func(t *testing.T) {
		bad := tamperCmdline(t, work, signed, mf)
		// The firmware accepts systemd-boot and refuses the UKI it loads.
		refused(t, bad, filepath.Join(work, "vm-tampered"), regexp.MustCompile(regexp.QuoteMeta(`Error loading \EFI\Linux\drover.efi: Access denied`)))
	})
	t.Run("boot unsigned", func(t *testing.T) {
		// The firmware refuses systemd-boot itself: the disk's boot option
		// (its number depends on how many devices the machine has).
		refused(t, unsigned, filepath.Join(work, "vm-unsigned"), regexp.MustCompile(`BdsDxe: failed to load Boot[0-9A-F]{4} "UEFI Misc Device"`))
	})
}

func startVM(t *testing.T, c *qemu.Config) *qemu.VM {
	t.Helper()
	vm, err := qemu.Start(t.Context(), c)
	if err != nil {
		t.Fatal(err)
	}
	return vm
}

// refused boots image under Secure Boot and requires the firmware to
// refuse a boot binary ("Access Denied" is EFI_ACCESS_DENIED, what
// LoadImage answers for an image that fails db verification) with no
// kernel ever starting, and evidence (which binary was refused) on the
// console. The firmware then tries the next boot options
// (network), so the VM is stopped once the refusal is on the console.
func refused(t *testing.T, image, state string, evidence *regexp.Regexp) {
	t.Helper()
	start := time.Now()
	vm := startVM(t, &qemu.Config{Image: image, StateDir: state, SecureBoot: true, DiskSize: 2 << 30})
	defer vm.Stop()
	ctx, cancel := context.WithTimeout(t.Context(), 8*time.Minute)
	defer cancel()
	got, err := vm.WaitFor(ctx, "Access Denied", "Linux version", "Reached target")
	if err != nil {
		t.Fatalf("%v\n%s", err, tail(vm.Log(), 40))
	}
	if got != "Access Denied" {
		t.Fatalf("the kernel started (%q) under Secure Boot:\n%s", got, tail(vm.Log(), 40))
	}
	// Linger briefly: a kernel line after the refusal would mean the
	// refused binary was only one of several tries.
	time.Sleep(20 * time.Second)
	log := vm.Log()
	if strings.Contains(log, "Linux version") || strings.Contains(log, "EFI stub:") {
		t.Fatalf("a kernel started after the refusal:\n%s", tail(log, 40))
	}
	if !evidence.MatchString(log) {
		t.Errorf("the console lacks %q:\n%s", evidence, grepLines(log, "Access", "rror"))
	}
	t.Logf("refused in %s:\n%s", time.Since(start).Round(time.Second), grepLines(log, "Access Denied", "Security", "rror"))
}

// espFiles extracts the named files from the ESP of a raw image into a
// temporary directory, for tools that read files (sbverify, objdump).
func espFiles(t *testing.T, raw string, mf *build.Manifest, names ...string) map[string]string {
	t.Helper()
	dir := t.TempDir()
	out := map[string]string{}
	for _, name := range names {
		p := filepath.Join(dir, strings.ReplaceAll(name, "/", "_"))
		if err := os.WriteFile(p, espFile(t, raw, mf, name), 0o644); err != nil {
			t.Fatal(err)
		}
		out[name] = p
	}
	return out
}

// checkUKISections reads the UKI with objdump and requires the UKI
// sections, with .cmdline holding the manifest's command line.
func checkUKISections(t *testing.T, uki string, mf *build.Manifest) {
	out := run(t, "objdump", "-h", uki)
	t.Logf("objdump -h:\n%s", out)
	for _, s := range []string{".osrel", ".cmdline", ".uname", ".initrd", ".linux", ".sbat"} {
		if !strings.Contains(out, " "+s+" ") {
			t.Errorf("objdump -h lists no %s section", s)
		}
	}
	dst := filepath.Join(t.TempDir(), "cmdline")
	run(t, "objcopy", "-O", "binary", "--only-section=.cmdline", uki, dst)
	if got, err := os.ReadFile(dst); err != nil || string(got) != mf.Cmdline {
		t.Errorf("objcopy --only-section=.cmdline gives %q (%v), the manifest's command line is %q", got, err, mf.Cmdline)
	}
}

// diffNamesBootFilesOnly runs drover diff between the unsigned and the
// signed build: exactly systemd-boot and the UKI differ, both now signed,
// and in the UKI only the initrd besides, whose config says the UKI is
// signed.
func diffNamesBootFilesOnly(t *testing.T, unsigned, signed string) {
	cmd := exec.Command(bin("drover"), "diff", "--json", unsigned, signed)
	var out bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, os.Stderr
	if err := cmd.Run(); err == nil {
		t.Fatal("drover diff exits 0: it finds the unsigned and signed images equal")
	}
	var d diff.Diff
	if err := json.Unmarshal(out.Bytes(), &d); err != nil {
		t.Fatalf("drover diff --json: %v\n%s", err, out.String())
	}
	var names []string
	for _, e := range d.ESP {
		names = append(names, e.Path)
		want := 1
		if e.Path == esp.UKIPath {
			want = 2
			if len(e.Details) != 2 || !strings.HasPrefix(e.Details[1], "section .initrd sha256 ") {
				t.Errorf("%s: %q, want the signature and section .initrd changed", e.Path, e.Details)
			}
		}
		if e.Change != diff.Changed || len(e.Details) != want || !strings.HasPrefix(e.Details[0], "signed by O=SnakeOil") {
			t.Errorf("%s: %s %q, want changed and signed by the snakeoil certificate", e.Path, e.Change, e.Details)
		}
	}
	if got := strings.Join(names, " "); got != loaderPath+" "+esp.UKIPath {
		t.Errorf("drover diff names boot files %q, want %s and %s", got, loaderPath, esp.UKIPath)
	}
	d.ESP = nil
	if !d.Equal() {
		t.Errorf("drover diff reports more than the boot files:\n%s", out.String())
	}
	text, _ := exec.Command(bin("drover"), "diff", unsigned, signed).Output()
	t.Logf("drover diff:\n%s", text)
}

// tamperCmdline copies the image and changes one byte of the UKI's
// .cmdline on the ESP: a hex digit of the root hash.
func tamperCmdline(t *testing.T, work, raw string, mf *build.Manifest) string {
	espPart := partition(t, mf, "esp")
	off, size := espPart.Offset, espPart.Size
	img, err := os.ReadFile(raw)
	if err != nil {
		t.Fatal(err)
	}
	part := img[off : off+size]
	needle := []byte(mf.Cmdline)
	at := bytes.Index(part, needle)
	if at < 0 || bytes.Index(part[at+1:], needle) >= 0 {
		t.Fatal("the command line is not found exactly once in the ESP")
	}
	i := at + len(needle) - 1 // last digit of drover.roothash=
	if part[i] == '0' {
		part[i] = '1'
	} else {
		part[i] = '0'
	}
	bad := filepath.Join(work, "tampered.raw")
	if err := os.WriteFile(bad, img, 0o644); err != nil {
		t.Fatal(err)
	}
	return bad
}

func grepLines(s string, subs ...string) string {
	var out []string
	for _, l := range strings.Split(s, "\n") {
		for _, sub := range subs {
			if strings.Contains(l, sub) {
				out = append(out, l)
				break
			}
		}
	}
	return strings.Join(out, "\n")
}

// TestSecureBootEnroll builds a signed image that carries its keys
// (--secure-boot-enroll) and boots it on Secure Boot firmware in setup mode
// (OVMF_VARS_4M.fd: no PK): systemd-boot enrols PK, KEK and db and resets;
// the next boot of the same machine runs with Secure Boot enforced.
func TestSecureBootEnroll(t *testing.T) {
	work := t.TempDir()
	recipe := secureBootRecipe(t, work)
	key := filepath.Join(work, "db.key")
	run(t, "openssl", "pkcs8", "-in", qemu.SnakeoilKey, "-passin", "pass:snakeoil", "-out", key)
	out := filepath.Join(work, "out")
	run(t, bin("drover"), "build", recipe, "-o", out, "--cache", filepath.Join(work, "cache"), "--agent", bin("drover-agent"),
		"--init", bin("drover-init"), "--secure-boot-key", key, "--secure-boot-cert", qemu.SnakeoilCert, "--secure-boot-enroll")
	raw := filepath.Join(out, "minimal.raw")
	mf := readManifest(t, filepath.Join(out, "minimal.manifest.json"))
	var keys []string
	for _, f := range mf.ESP {
		if strings.HasPrefix(f.Path, esp.KeysDir+"/") {
			keys = append(keys, f.Path)
		}
	}
	if len(keys) != 3 {
		t.Fatalf("ESP keys %v, want PK.auth, KEK.auth and db.auth under %s", keys, esp.KeysDir)
	}

	c := &qemu.Config{Image: raw, StateDir: filepath.Join(work, "vm"), SecureBoot: true, DiskSize: 2 << 30,
		OVMFVars: "/usr/share/OVMF/OVMF_VARS_4M.fd"}
	start := time.Now()
	vm := startVM(t, c)
	ctx, cancel := context.WithTimeout(t.Context(), 10*time.Minute)
	defer cancel()
	// systemd-boot's own words; the machine then resets, which ends QEMU
	// (-no-reboot).
	if _, err := vm.WaitFor(ctx, "successfully enrolled"); err != nil {
		vm.Stop()
		t.Fatalf("systemd-boot did not enrol the keys: %v\n%s", err, tail(vm.Log(), 30))
	}
	vm.Wait()
	if strings.Contains(vm.Log(), "Linux version") {
		t.Fatalf("a kernel ran before the keys were enrolled:\n%s", tail(vm.Log(), 30))
	}
	t.Logf("enrolled in %s:\n%s", time.Since(start).Round(time.Second), grepLines(vm.Log(), "nroll", "ecure"))

	start = time.Now()
	vm = startVM(t, c)
	defer vm.Stop()
	if _, err := vm.WaitFor(ctx, "Reached target multi-user.target"); err != nil {
		t.Fatalf("second boot: %v\n%s", err, tail(vm.Log(), 40))
	}
	if !strings.Contains(vm.Log(), "secureboot: Secure boot enabled") {
		t.Errorf("second boot: the kernel does not report Secure Boot enabled:\n%s", grepLines(vm.Log(), "ecure"))
	}
	t.Logf("booted with the enrolled keys in %s", time.Since(start).Round(time.Second))
}
