//go:build integration

package main

import (
	"encoding/json"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/google/go-containerregistry/pkg/v1/random"

	"github.com/drover-os/drover/harness/registry"
)

// TestDiffNamesChangedCachedImage pushes two different images under the
// same repository and tag of an in-process registry, one after the other,
// builds recipes/minimal.yaml caching that tag pinned to the first digest,
// then to the second, and checks that drover diff names the image and
// both digests the registry answered, in text and JSON; and that a build
// is equal to itself.
func TestDiffNamesChangedCachedImage(t *testing.T) {
	ctx := t.Context()
	work := t.TempDir()
	reg, err := registry.Start(ctx, "127.0.0.1:0", nil)
	if err != nil {
		t.Fatal(err)
	}
	defer reg.Close()
	// The reference names the registry's own address: a loopback host is
	// asked over plain HTTP, so no --registry-mirror is needed.
	const repo, tag = "drover/diff-cached", "v1"
	name := reg.Addr() + "/" + repo + ":" + tag
	var digests [2]string
	for i := range digests {
		img, err := random.Image(4096, 1)
		if err != nil {
			t.Fatal(err)
		}
		if err := registry.Push(ctx, reg, repo, tag, img); err != nil {
			t.Fatal(err)
		}
		digests[i] = tagDigest(t, reg.Addr(), repo, tag)
	}
	if digests[0] == digests[1] {
		t.Fatalf("both pushes of %s gave digest %s", name, digests[0])
	}
	t.Logf("%s: %s, then %s", name, digests[0], digests[1])

	agent, initBin := ownBinaries(t, work)
	recipeSrc, lockSrc := minimalRecipe(t)
	buildOne := func(dir, digest string) string {
		dir = filepath.Join(work, dir)
		os.MkdirAll(dir, 0o755)
		recipe := filepath.Join(dir, "minimal.yaml")
		os.WriteFile(recipe, append(recipeSrc, []byte("images:\n  - ref: "+name+"@"+digest+"\n")...), 0o644)
		os.WriteFile(filepath.Join(dir, "minimal.yaml.lock"), lockSrc, 0o644)
		// The image is one of the lock's inputs: lock writes its line (and,
		// the inputs having changed, resolves the closure against the
		// mirror's current Releases: the same for both builds).
		if _, errOut, code := drover(t, "lock", recipe, "-q"); code != 0 {
			t.Fatalf("lock %s failed (exit %d):\n%s", recipe, code, errOut)
		}
		out := filepath.Join(dir, "out")
		if _, errOut, code := drover(t, "build", recipe, "-o", out, "--agent", agent, "--init", initBin, "-q"); code != 0 {
			t.Fatalf("build %s failed (exit %d):\n%s", recipe, code, errOut)
		}
		if _, err := loadManifest(filepath.Join(out, "minimal.manifest.json")); err != nil {
			t.Fatal(err)
		}
		return filepath.Join(out, "minimal.raw")
	}
	rawA, rawB := buildOne("a", digests[0]), buildOne("b", digests[1])

	t.Run("diff-json", func(t *testing.T) {
		out, errOut, code := drover(t, "diff", "--json", rawA, rawB)
		if code != 1 {
			t.Fatalf("exit %d, want 1:\n%s%s", code, out, errOut)
		}
		var d struct {
			Equal  bool
			Images []struct {
				Name     string
				Old, New *struct{ Digest, Location string }
			}
			CacheDisk any
		}
		if err := json.Unmarshal([]byte(out), &d); err != nil {
			t.Fatalf("%v:\n%s", err, out)
		}
		if d.Equal || len(d.Images) != 1 || d.CacheDisk != nil {
			t.Fatalf("equal=%v, %d image changes, cache disk %v; want one image change, no cache disk:\n%s", d.Equal, len(d.Images), d.CacheDisk, out)
		}
		c := d.Images[0]
		if c.Name != name || c.Old == nil || c.New == nil || c.Old.Digest != digests[0] || c.New.Digest != digests[1] ||
			c.Old.Location != "root" || c.New.Location != "root" {
			t.Errorf("image change %+v old %+v new %+v, want %s %s → %s, in the root both", c, c.Old, c.New, name, digests[0], digests[1])
		}
	})

	t.Run("diff-text", func(t *testing.T) {
		out, errOut, code := drover(t, "diff", rawA, rawB)
		if code != 1 {
			t.Fatalf("exit %d, want 1:\n%s%s", code, out, errOut)
		}
		t.Logf("drover diff:\n%s", out)
		var lines []string
		for _, l := range strings.Split(out, "\n") {
			if strings.HasPrefix(l, "image ") {
				lines = append(lines, l)
			}
		}
		// "<what, 13 wide> <mark> <text>"
		want := "image         ~ " + name + " digest " + digests[0] + " → " + digests[1]
		if len(lines) != 1 || !strings.HasPrefix(lines[0], want+",") && lines[0] != want {
			t.Errorf("image lines %q, want one starting %q", lines, want)
		}
	})

	t.Run("diff-same-image", func(t *testing.T) {
		for _, args := range [][]string{{rawA, rawA}, {"--json", rawB, rawB}} {
			out, errOut, code := drover(t, append([]string{"diff"}, args...)...)
			if code != 0 || !strings.Contains(out, "no differences") {
				t.Errorf("diff %v: exit %d, want 0:\n%s%s", args, code, out, errOut)
			}
		}
	})
}

// tagDigest asks the registry which manifest repo:tag names now: its
// Docker-Content-Digest answer.
func tagDigest(t *testing.T, addr, repo, tag string) string {
	t.Helper()
	req, _ := http.NewRequestWithContext(t.Context(), http.MethodHead, "http://"+addr+"/v2/"+repo+"/manifests/"+tag, nil)
	req.Header.Set("Accept", "application/vnd.oci.image.manifest.v1+json, application/vnd.docker.distribution.manifest.v2+json")
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	d := resp.Header.Get("Docker-Content-Digest")
	if resp.StatusCode != http.StatusOK || !strings.HasPrefix(d, "sha256:") || len(d) != len("sha256:")+64 {
		t.Fatalf("HEAD %s: %s, Docker-Content-Digest %q", req.URL, resp.Status, d)
	}
	return d
}
