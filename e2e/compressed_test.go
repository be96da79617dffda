//go:build e2e

package e2e

import (
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/drover-os/drover/harness/qemu"
)

// TestMinimalImageCompressed builds the minimal image with each root
// compression, checks the root with the host's tools, boots it on the
// image's own kernel (6.12, which decompresses it, not the host's), and
// logs what each boot read from the disk beside the uncompressed one: on
// ECS every block is fetched from the snapshot on first read.
func TestMinimalImageCompressed(t *testing.T) {
	work, err := os.MkdirTemp("", "drover-e2e-compressed-")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { os.RemoveAll(work) })
	type result struct {
		root, read int64
		boot       time.Duration
	}
	results := map[string]result{}
	compressions := []string{"none", "lz4", "zstd"}
	for _, c := range compressions {
		t.Run(c, func(t *testing.T) {
			dir := filepath.Join(work, c)
			os.MkdirAll(dir, 0o755)
			recipe := testRecipe(t, dir)
			text := strings.Replace(string(readFile(t, recipe)), "\nimage:\n", "\nimage:\n  rootfs:\n    compression: "+c+"\n", 1)
			writeFile(t, recipe, []byte(text))

			// Cold, then warm from the cache: the same image.
			cache, cold, warm := filepath.Join(dir, "cache"), filepath.Join(dir, "cold"), filepath.Join(dir, "out")
			buildAs(t, "", recipe, cache, cold)
			log := run(t, bin("drover"), "build", recipe, "-o", warm, "--cache", cache, "--agent", bin("drover-agent"), "--init", bin("drover-init"))
			raw := filepath.Join(warm, "minimal.raw")
			if a, b := fileSHA(t, filepath.Join(cold, "minimal.raw")), fileSHA(t, raw); a != b {
				t.Fatalf("cold and warm builds differ: %s vs %s", a, b)
			}
			if c != "none" && !regexp.MustCompile(`-compressed \(.*\); [1-9][0-9]* files' encodings from the cache`).MatchString(log) {
				t.Errorf("the warm build compressed everything again:\n%s", log)
			}
			mf := readManifest(t, filepath.Join(warm, "minimal.manifest.json"))
			if mf.RootFS.Compression != c || (c != "none") != (mf.RootFS.CompressedFiles > 0) {
				t.Errorf("manifest rootfs: %+v", mf.RootFS)
			}

			root, verity := filepath.Join(dir, "root.img"), filepath.Join(dir, "verity.img")
			p := partition(t, mf, "root")
			extract(t, raw, p.Offset, p.Size, root)
			v := partition(t, mf, "root-verity")
			extract(t, raw, v.Offset, v.Size, verity)
			t.Log(run(t, "veritysetup", "verify", root, verity, mf.RootHash))
			checkContent(t, rootDir(t, root, c), mf)

			start := time.Now()
			vm, _ := boot(t, raw, filepath.Join(dir, "vm"), false, 12*time.Minute, "E2E-REPORT-END")
			defer vm.Stop()
			if _, err := vm.WaitFor(t.Context(), "Reached target multi-user.target"); err != nil {
				t.Fatalf("multi-user.target: %v", err)
			}
			took := time.Since(start)
			st, err := vm.BlockStats(qemu.BootDisk)
			if err != nil {
				t.Fatal(err)
			}
			console := vm.Log()
			checkMounts(t, console, "vda")
			for _, want := range []string{"E2E-ROOT-READONLY", "E2E-USR-READONLY"} {
				if !strings.Contains(console, want) {
					t.Errorf("console lacks %s", want)
				}
			}
			if !systemdBanner.MatchString(console) {
				t.Error("no systemd banner on the console")
			}
			if regexp.MustCompile(`erofs[^\n]*(error|corrupt|failed)`).MatchString(console) {
				t.Errorf("the kernel complains about the erofs root:\n%s", tail(console, 40))
			}
			results[c] = result{root: p.Size, read: st.ReadBytes, boot: took}
		})
	}
	for _, c := range compressions {
		if r, ok := results[c]; ok {
			t.Logf("%-5s root partition %6.1f MiB, read until multi-user %6.1f MiB, booted and reported in %s",
				c, float64(r.root)/(1<<20), float64(r.read)/(1<<20), r.boot.Round(100*time.Millisecond))
		}
	}
}
