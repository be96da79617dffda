//go:build integration

package main

import (
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"reflect"
	"strings"
	"testing"

	"github.com/drover-os/drover/image/build"
	"github.com/drover-os/drover/image/debian"
)

// swapPackage is the package whose version the second build changes: a
// small package of recipes/minimal.yaml's closure that the lock takes from
// trixie-security while trixie's signed index still lists the release's
// version. The build checks every deb line against the signed index of
// its suite (a version from another release's pool, labelled trixie, is
// refused), so the swapped line must be one that index lists: trixie's.
const swapPackage, swapSource = "libzstd1", "libzstd"

// swapCandidates are other versions of swapPackage in trixie's signed
// index. The first the mirror serves that is not the locked version is
// used.
var swapCandidates = []struct{ version, path string }{
	{"1.5.7+dfsg-1", "pool/main/libz/libzstd/libzstd1_1.5.7+dfsg-1_amd64.deb"},
}

// TestDiffAndVerifyTwoBuilds builds recipes/minimal.yaml twice, the second
// time with one recipe file's content and one package's version changed,
// and checks that drover diff names exactly those changes and what
// necessarily follows from them, in all three forms; then that drover
// verify accepts the fresh image and names the partition of a flipped byte.
func TestDiffAndVerifyTwoBuilds(t *testing.T) {
	work := t.TempDir()
	agent, initBin := ownBinaries(t, work)
	recipeSrc, lockSrc := minimalRecipe(t)
	oldLine, oldVersion := lockLine(t, string(lockSrc), swapPackage)
	newVersion, newLine := otherVersion(t, oldVersion, strings.Fields(oldLine)[3])
	t.Logf("second build: %s %s → %s", swapPackage, oldVersion, newVersion)

	buildOne := func(name, content, lockText string) (string, *build.Manifest) {
		dir := filepath.Join(work, name)
		os.MkdirAll(dir, 0o755)
		recipe := string(recipeSrc) + "files:\n  - path: /etc/drover-diff-test\n    content: \"" + content + "\\n\"\n"
		os.WriteFile(filepath.Join(dir, "minimal.yaml"), []byte(recipe), 0o644)
		os.WriteFile(filepath.Join(dir, "minimal.yaml.lock"), []byte(lockText), 0o644)
		out := filepath.Join(dir, "out")
		// The download cache is the default one, as for any drover run.
		_, errOut, code := drover(t, "build", filepath.Join(dir, "minimal.yaml"), "-o", out, "--agent", agent, "--init", initBin, "-q")
		if code != 0 {
			t.Fatalf("build %s failed (exit %d):\n%s", name, code, errOut)
		}
		m, err := loadManifest(filepath.Join(out, "minimal.manifest.json"))
		if err != nil {
			t.Fatal(err)
		}
		return filepath.Join(out, "minimal.raw"), m
	}
	rawA, a := buildOne("a", "first", string(lockSrc))
	rawB, b := buildOne("b", "second", strings.Replace(string(lockSrc), oldLine, newLine, 1))

	t.Run("diff-json", func(t *testing.T) {
		out, errOut, code := drover(t, "diff", "--json", rawA, rawB)
		if code != 1 {
			t.Fatalf("exit %d, want 1:\n%s%s", code, out, errOut)
		}
		var d struct {
			Equal    bool
			Inputs   []struct{ What, Old, New string }
			Packages []struct {
				Name, Old, New, Note string
			}
			Go, URLs                  []any
			Kernel, Cmdline, RootHash *struct{ Old, New string }
			Units, InitrdModules      struct {
				Added, Removed []string
				Reordered      bool
			}
			ESP   []struct{ Path, Change string }
			Files []struct {
				Path, Change, From string
				Details            []string
			}
			Partitions []struct{ Name string }
			RootFS     *struct{ Old, New int64 } `json:"rootfsSize"`
			Disk       *struct{ Old, New int64 } `json:"diskSize"`
		}
		if err := json.Unmarshal([]byte(out), &d); err != nil {
			t.Fatalf("%v:\n%s", err, out)
		}
		var got []string
		for _, c := range d.Inputs {
			got = append(got, "input "+c.What)
		}
		for _, p := range d.Packages {
			got = append(got, fmt.Sprintf("package %s %s → %s %s", p.Name, p.Old, p.New, p.Note))
		}
		if len(d.Go)+len(d.URLs) > 0 || d.Kernel != nil || d.Cmdline != nil || d.Disk != nil {
			got = append(got, fmt.Sprintf("unexpected: go %v urls %v kernel %v cmdline %v disk %v", d.Go, d.URLs, d.Kernel, d.Cmdline, d.Disk))
		}
		if d.RootHash != nil {
			got = append(got, "root hash "+d.RootHash.Old+" → "+d.RootHash.New)
		}
		if len(d.Units.Added)+len(d.Units.Removed)+len(d.InitrdModules.Added)+len(d.InitrdModules.Removed) > 0 || d.InitrdModules.Reordered {
			got = append(got, fmt.Sprintf("unexpected: units %+v initrd %+v", d.Units, d.InitrdModules))
		}
		for _, e := range d.ESP {
			got = append(got, "esp "+e.Change+" "+e.Path)
		}
		for _, f := range d.Files {
			got = append(got, fmt.Sprintf("file %s %s (%s) %s", f.Change, f.Path, f.From, strings.Join(f.Details, ",")))
		}
		for _, p := range d.Partitions {
			got = append(got, "partition "+p.Name)
		}
		if d.RootFS != nil {
			got = append(got, "rootfs size")
		}
		want := []string{
			"input recipe", "input lock",
			fmt.Sprintf("package %s %s → %s ", swapPackage, oldVersion, newVersion),
			"root hash " + a.RootHash + " → " + b.RootHash,
			// The UKI carries the root hash twice: in its .cmdline and in
			// drover-init's config inside its .initrd.
			"esp changed EFI/Linux/drover.efi",
			"file changed /etc/drover-diff-test (recipe) content",
			// BUILD_ID names the inputs.
			"file changed /usr/lib/os-release (drover) content",
			"partition esp", "partition root", "partition root-verity",
		}
		if a.RootFS.Size != b.RootFS.Size {
			want = append(want, "rootfs size")
		}
		if d.Equal || !reflect.DeepEqual(got, want) {
			t.Errorf("diff (equal=%v):\n got %q\nwant %q", d.Equal, got, want)
		}
	})

	t.Run("diff-text", func(t *testing.T) {
		out, errOut, code := drover(t, "diff", rawA, filepath.Dir(rawB))
		if code != 1 {
			t.Fatalf("exit %d, want 1:\n%s%s", code, out, errOut)
		}
		t.Logf("drover diff:\n%s", out)
		// Each line is "<what, 13 wide> <mark> <text>"; the subject (package,
		// path, partition) is asserted where it is one.
		var kinds []string
		for _, line := range strings.Split(strings.TrimSpace(out), "\n")[1:] {
			// A changelog line's entries follow it, indented.
			if strings.HasPrefix(line, "summary: ") || strings.HasPrefix(line, "  ") {
				continue
			}
			k := strings.Join(strings.Fields(line[:16]), " ")
			if what := strings.TrimSpace(line[:13]); what == "package" || what == "esp" || what == "file" || what == "partition" {
				k += " " + strings.Fields(line[16:])[0]
			}
			kinds = append(kinds, k)
		}
		want := []string{"recipe ~", "lock ~", "package ~ " + swapPackage, "changelog -", "root hash ~",
			"esp ~ EFI/Linux/drover.efi:",
			"file ~ /etc/drover-diff-test", "file ~ /usr/lib/os-release",
			"partition ~ esp:", "partition ~ root:", "partition ~ root-verity:"}
		if a.RootFS.Size != b.RootFS.Size {
			want = append(want, "rootfs size ~")
		}
		if !reflect.DeepEqual(kinds, want) {
			t.Errorf("lines:\n got %q\nwant %q", kinds, want)
		}
		if !strings.Contains(out, "package       ~ "+swapPackage+" "+oldVersion+" → "+newVersion) {
			t.Errorf("no package line for %s %s → %s", swapPackage, oldVersion, newVersion)
		}
		// The second build takes an older libzstd1: the diff says it is
		// a downgrade and which of the old version's changelog entries
		// (recorded by the first build) the image loses.
		if !strings.Contains(out, "changelog     - "+swapSource+" "+oldVersion+" → "+newVersion+" ("+swapPackage+"): downgrade, loses ") ||
			!strings.Contains(out, "\n                "+oldVersion+" (") {
			t.Errorf("no downgrade line naming the lost %s entry", oldVersion)
		}
		if !strings.Contains(out, "\nsummary: recipe changed, lock changed, 1 package changed, 1 package downgraded (losing fixes of ") ||
			!strings.Contains(out, "), root hash changed, 1 boot file changed, ") {
			t.Errorf("summary line is not the expected one")
		}
	})

	t.Run("diff-markdown", func(t *testing.T) {
		out, errOut, code := drover(t, "diff", "--markdown", filepath.Join(filepath.Dir(rawA), "minimal.manifest.json"), rawB)
		if code != 1 {
			t.Fatalf("exit %d, want 1:\n%s%s", code, out, errOut)
		}
		var sections []string
		for _, line := range strings.Split(out, "\n") {
			if strings.HasPrefix(line, "### ") {
				sections = append(sections, line[4:])
			}
		}
		want := []string{"Inputs", "Packages", "What the new versions fix", "Kernel, command line, root", "Boot files (ESP)", "Files", "Partitions"}
		if !reflect.DeepEqual(sections, want) {
			t.Errorf("sections %q, want %q", sections, want)
		}
		for _, row := range []string{
			"| `" + swapPackage + "` | " + oldVersion + " | " + newVersion + " | ",
			"| `/etc/drover-diff-test` | changed | recipe | content |",
			"| `/usr/lib/os-release` | changed | drover | content |",
		} {
			if !strings.Contains(out, row) {
				t.Errorf("markdown lacks the row %q:\n%s", row, out)
			}
		}
	})

	t.Run("diff-same-image", func(t *testing.T) {
		for _, args := range [][]string{{rawA, rawA}, {strings.TrimSuffix(rawA, ".raw") + ".qcow2", filepath.Dir(rawA)}, {"--json", rawB, rawB}} {
			out, errOut, code := drover(t, append([]string{"diff"}, args...)...)
			if code != 0 || !strings.Contains(out, "no differences") {
				t.Errorf("diff %v: exit %d, want 0:\n%s%s", args, code, out, errOut)
			}
		}
		if _, errOut, code := drover(t, "diff", rawA, filepath.Join(work, "missing.raw")); code != 2 || !strings.Contains(errOut, "missing.manifest.json") {
			t.Errorf("diff with a missing manifest: exit %d, want 2:\n%s", code, errOut)
		}
	})

	t.Run("verify", func(t *testing.T) {
		for _, raw := range []string{rawA, rawB} {
			out, errOut, code := drover(t, "verify", raw)
			if code != 0 {
				t.Fatalf("verify %s: exit %d:\n%s%s", raw, code, out, errOut)
			}
		}
		if _, errOut, code := drover(t, "verify", filepath.Join(work, "missing.raw"), "--manifest", filepath.Join(filepath.Dir(rawA), "minimal.manifest.json")); code != 2 {
			t.Errorf("verify of a missing image: exit %d, want 2:\n%s", code, errOut)
		}
		cp := filepath.Join(work, "copy.raw")
		copySparse(t, rawA, cp)
		manifest := filepath.Join(filepath.Dir(rawA), "minimal.manifest.json")
		part := func(name string) build.Partition {
			for _, p := range a.Partitions {
				if p.Name == name {
					return p
				}
			}
			t.Fatalf("no %s partition in the manifest", name)
			return build.Partition{}
		}
		cases := []struct {
			part string
			off  int64
			want string
		}{
			// 8 MiB into the ESP is file data (the UKI).
			{"esp", part("esp").Offset + 8<<20, "esp: EFI/Linux/drover.efi: "},
			{"root", part("root").Offset + part("root").Size/2 + 123, "root: dm-verity: data block "},
			{"root-verity", part("root-verity").Offset + 3*4096 + 77, "root-verity: dm-verity: hash block "},
		}
		for _, c := range cases {
			flipByte(t, cp, c.off)
			out, errOut, code := drover(t, "verify", "--manifest", manifest, cp)
			t.Logf("flipped byte %d (%s):\n%s", c.off, c.part, out)
			if code != 1 {
				t.Errorf("%s: exit %d, want 1:\n%s", c.part, code, errOut)
			}
			if !strings.Contains(out, "\n"+c.part+": sha256 of the partition") || !strings.Contains(out, c.want) {
				t.Errorf("%s: output lacks the partition digest line or %q", c.part, c.want)
			}
			jsonOut, _, _ := drover(t, "verify", "--json", "--manifest", manifest, cp)
			var res struct {
				OK       bool
				Problems []struct{ Part, Message string }
			}
			if err := json.Unmarshal([]byte(jsonOut), &res); err != nil {
				t.Fatalf("%v:\n%s", err, jsonOut)
			}
			parts := map[string]bool{}
			for _, p := range res.Problems {
				parts[p.Part] = true
			}
			if res.OK || !reflect.DeepEqual(parts, map[string]bool{"image": true, c.part: true}) {
				t.Errorf("%s: JSON ok=%v parts %v, want only image and %s", c.part, res.OK, parts, c.part)
			}
			flipByte(t, cp, c.off) // restore for the next case
		}
		if out, errOut, code := drover(t, "verify", "--manifest", manifest, cp); code != 0 {
			t.Errorf("restored copy: exit %d:\n%s%s", code, out, errOut)
		}
	})
}

// ownBinaries builds drover-agent and drover-init the way make build does;
// the build installs them into the image.
func ownBinaries(t *testing.T, dir string) (agent, initBin string) {
	t.Helper()
	bin := filepath.Join(dir, "bin")
	cmd := exec.Command("go", "build", "-trimpath", "-o", bin+"/", "../drover-agent", "../drover-init")
	cmd.Env = append(os.Environ(), "CGO_ENABLED=0")
	if out, err := cmd.CombinedOutput(); err != nil {
		t.Fatalf("building drover-agent and drover-init: %v\n%s", err, out)
	}
	return filepath.Join(bin, "drover-agent"), filepath.Join(bin, "drover-init")
}

// lockLine returns the deb line of pkg and its version.
func lockLine(t *testing.T, lockText, pkg string) (line, version string) {
	t.Helper()
	for _, l := range strings.Split(lockText, "\n") {
		if f := strings.Fields(l); len(f) == 8 && f[0] == "deb" && f[1] == pkg {
			return l, f[2]
		}
	}
	t.Fatalf("recipes/minimal.yaml.lock has no deb line for %s: pick another small package in swapPackage", pkg)
	return "", ""
}

// otherVersion downloads the first candidate version the mirror serves and
// returns it with its lock line.
func otherVersion(t *testing.T, locked, arch string) (version, line string) {
	t.Helper()
	mirror, err := debian.ResolveMirror("", os.Getenv, os.DirFS("/"))
	if err != nil {
		t.Fatalf("%v (set DROVER_MIRROR)", err)
	}
	var tried []string
	for _, c := range swapCandidates {
		if c.version == locked {
			continue
		}
		url := strings.TrimSuffix(mirror, "/") + "/" + c.path
		resp, err := http.Get(url)
		if err != nil {
			t.Fatalf("fetching %s: %v", url, err)
		}
		h := sha256.New()
		n, err := io.Copy(h, resp.Body)
		resp.Body.Close()
		if resp.StatusCode != http.StatusOK || err != nil {
			tried = append(tried, fmt.Sprintf("%s (%s %v)", url, resp.Status, err))
			continue
		}
		return c.version, fmt.Sprintf("deb %s %s %s %d %s trixie %s", swapPackage, c.version, arch, n, hex.EncodeToString(h.Sum(nil)), c.path)
	}
	t.Fatalf("the mirror serves none of the other %s versions: %s; add a version it serves to swapCandidates", swapPackage, strings.Join(tried, ", "))
	return "", ""
}

// copySparse copies an image, leaving all-zero chunks as holes.
func copySparse(t *testing.T, src, dst string) {
	t.Helper()
	in, err := os.Open(src)
	if err != nil {
		t.Fatal(err)
	}
	defer in.Close()
	out, err := os.Create(dst)
	if err != nil {
		t.Fatal(err)
	}
	defer out.Close()
	st, _ := in.Stat()
	if err := out.Truncate(st.Size()); err != nil {
		t.Fatal(err)
	}
	buf := make([]byte, 1<<20)
	zero := make([]byte, len(buf))
	for off := int64(0); off < st.Size(); off += int64(len(buf)) {
		n, err := in.ReadAt(buf, off)
		if err != nil && err != io.EOF {
			t.Fatal(err)
		}
		if string(buf[:n]) == string(zero[:n]) {
			continue
		}
		if _, err := out.WriteAt(buf[:n], off); err != nil {
			t.Fatal(err)
		}
	}
}

func flipByte(t *testing.T, path string, off int64) {
	t.Helper()
	f, err := os.OpenFile(path, os.O_RDWR, 0)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	b := make([]byte, 1)
	if _, err := f.ReadAt(b, off); err != nil {
		t.Fatal(err)
	}
	b[0] ^= 0x01
	if _, err := f.WriteAt(b, off); err != nil {
		t.Fatal(err)
	}
}

// minimalRecipe reads recipes/minimal.yaml and its lock, for tests that
// build variants of it in their own directory.
func minimalRecipe(t *testing.T) (recipe, lock []byte) {
	t.Helper()
	var err error
	if recipe, err = os.ReadFile(filepath.Join("..", "..", "recipes", "minimal.yaml")); err == nil {
		lock, err = os.ReadFile(filepath.Join("..", "..", "recipes", "minimal.yaml.lock"))
	}
	if err != nil {
		t.Fatal(err)
	}
	return recipe, lock
}
