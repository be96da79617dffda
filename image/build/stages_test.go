package build

import (
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"

	"github.com/drover-os/drover/image/cache"
	"github.com/drover-os/drover/image/deb/debtest"
	"github.com/drover-os/drover/image/debian/debiantest"
	"github.com/drover-os/drover/image/lock"
	"github.com/drover-os/drover/image/lockcheck"
	"github.com/drover-os/drover/image/recipe"
	"github.com/drover-os/drover/image/sources"
)

// kernelless is a plan for one package, already in a fresh cache, that
// ships no kernel: the build gets through fetch, assemble, go components
// and add files, and finalize refuses it. Nothing touches the network.
func kernelless(t *testing.T) (*Plan, Options, string) {
	t.Helper()
	dir := t.TempDir()
	debBytes, err := debtest.Build(debtest.Deb{
		Control:     map[string]string{"Package": "hello", "Version": "1.0", "Architecture": "amd64"},
		Compression: "gz",
		Entries:     []debtest.Entry{debtest.Dir("./", 0o755), debtest.Dir("./usr/", 0o755), debtest.Dir("./usr/bin/", 0o755), debtest.File("./usr/bin/hello", 0o755, "hi")},
	})
	if err != nil {
		t.Fatal(err)
	}
	sum := sha256.Sum256(debBytes)
	sha := hex.EncodeToString(sum[:])
	c, err := cache.Open(filepath.Join(dir, "cache"))
	if err != nil {
		t.Fatal(err)
	}
	if _, err := c.Put(sha, bytes.NewReader(debBytes)); err != nil {
		t.Fatal(err)
	}
	r, err := recipe.Parse(filepath.Join(dir, "r.yaml"), []byte("name: kernelless\npackages: [hello]\n"))
	if err != nil {
		t.Fatal(err)
	}
	suite, so := signedTrixie(t, c, r, []debiantest.Package{{Name: "hello", Version: "1.0", Data: debBytes}})
	l := &lock.Lock{Inputs: r.InputsDigest(), Epoch: 1795252544,
		Debs:   []lock.Deb{{Name: "hello", Version: "1.0", Arch: "amd64", Size: int64(len(debBytes)), SHA256: sha, Suite: "trixie", Path: "pool/main/h/hello/hello_1.0_amd64.deb"}},
		Suites: []lock.Suite{suite}}
	out := filepath.Join(dir, "out")
	p, err := NewPlan(r, l, out)
	if err != nil {
		t.Fatal(err)
	}
	agentBin, initBin := filepath.Join(dir, "drover-agent"), filepath.Join(dir, "drover-init")
	for _, b := range []string{agentBin, initBin} {
		if err := os.WriteFile(b, []byte("binary"), 0o755); err != nil {
			t.Fatal(err)
		}
	}
	pause := map[string]string{"amd64": agentBin, "arm64": initBin} // any bytes: nothing runs them
	// The mirror is never asked: the package, the InRelease and the index are cached.
	return p, Options{Sources: so, AgentBin: agentBin, InitBin: initBin, PauseBins: pause}, out
}

// assertNoOutputs: a failed build leaves the output directory as it was —
// no image, no manifest, no work directory.
func assertNoOutputs(t *testing.T, out string) {
	t.Helper()
	ents, err := os.ReadDir(out)
	if err != nil && !errors.Is(err, os.ErrNotExist) {
		t.Fatal(err)
	}
	for _, e := range ents {
		t.Errorf("a failed build left %s in %s", e.Name(), out)
	}
}

// TestStagesRunInOrderAndStopAtTheFirstFailure: the stages run in the
// documented order, each logged when it starts and ends, and the first
// failure stops the build with the stage's name in front of the cause.
func TestStagesRunInOrderAndStopAtTheFirstFailure(t *testing.T) {
	p, o, out := kernelless(t)
	var log bytes.Buffer
	o.Log = &log
	res, err := Build(context.Background(), p, o)
	want := "finalize: want exactly one kernel in /usr/lib/modules, found []: check the recipe's kernel"
	if res != nil || err == nil || err.Error() != want {
		t.Fatalf("result %v, error %v\nwant: %s", res, err, want)
	}
	var started, done []string
	for _, line := range strings.Split(log.String(), "\n") {
		if m := regexp.MustCompile(`^build: (.+) …$`).FindStringSubmatch(line); m != nil {
			started = append(started, m[1])
		}
		if m := regexp.MustCompile(`^build: (.+) done in `).FindStringSubmatch(line); m != nil {
			done = append(done, m[1])
		}
	}
	if strings.Join(started, ",") != "fetch,assemble,cni plugins,package facts,go components,drover binaries,credential providers,sandbox image,cached images,add files,remove paths,finalize" || strings.Join(done, ",") != "fetch,assemble,cni plugins,package facts,go components,drover binaries,credential providers,sandbox image,cached images,add files,remove paths" {
		t.Errorf("started %q, done %q\nlog:\n%s", started, done, log.String())
	}
	if !strings.Contains(log.String(), "build: 1 packages assembled: ") {
		t.Errorf("assemble did not report the package:\n%s", log.String())
	}
	assertNoOutputs(t, out)
}

// TestStageErrorsNameTheStage: a failure in fetch (no mirror) and in add
// files (drover-agent missing) carry the stage name and what to do.
func TestStageErrorsNameTheStage(t *testing.T) {
	p, o, out := kernelless(t)
	o.Sources.Mirror = ""
	if _, err := Build(context.Background(), p, o); err == nil || err.Error() != "fetch: "+p.Recipe.Path+": no Debian mirror for suite trixie: pass --mirror, set DROVER_MIRROR or configure apt" {
		t.Errorf("no mirror: %v", err)
	}
	assertNoOutputs(t, out)

	p, o, out = kernelless(t)
	o.AgentBin = filepath.Join(t.TempDir(), "missing")
	_, err := Build(context.Background(), p, o)
	if err == nil || !strings.HasPrefix(err.Error(), "drover binaries: drover's own binary /usr/bin/drover-agent: ") || !strings.HasSuffix(err.Error(), "(pass an existing file, or neither --agent nor --init to build them from the checkout)") {
		t.Errorf("missing agent: %v", err)
	}
	assertNoOutputs(t, out)
}

// TestCancelledBuildStops: a cancelled context stops the build before the
// next stage and leaves nothing behind.
func TestCancelledBuildStops(t *testing.T) {
	p, o, out := kernelless(t)
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	var log bytes.Buffer
	o.Log = &log
	if _, err := Build(ctx, p, o); !errors.Is(err, context.Canceled) {
		t.Fatalf("error %v, want context.Canceled", err)
	}
	if log.Len() != 0 {
		t.Errorf("a stage ran after cancel:\n%s", log.String())
	}
	assertNoOutputs(t, out)
}

// signedTrixie signs a trixie index of pkgs with a test key, as
// debiantest's archive does, and puts its InRelease and Packages.xz into
// c: fetch checks every deb line against the index of the InRelease the
// lock pins before it fetches a .deb, here from the cache alone (the
// mirror is a closed port). It returns the lock's record of the suite and
// the sources options that trust the test key.
func signedTrixie(t *testing.T, c *cache.Cache, r *recipe.Recipe, pkgs []debiantest.Package) (lock.Suite, sources.Options) {
	t.Helper()
	a := debiantest.New(t, "trixie", pkgs)
	inRelease := a.Get("dists/trixie/InRelease")
	for _, data := range [][]byte{inRelease, a.Get("dists/trixie/main/binary-amd64/Packages.xz")} {
		sum := sha256.Sum256(data)
		if _, err := c.Put(hex.EncodeToString(sum[:]), bytes.NewReader(data)); err != nil {
			t.Fatal(err)
		}
	}
	so := sources.Options{Mirror: "http://127.0.0.1:9", Keyring: a.KeyringPath, Cache: c, Parallel: 1}
	tr, err := so.TrustRoot(r, "trixie")
	if err != nil {
		t.Fatal(err)
	}
	sum := sha256.Sum256(inRelease)
	return lock.Suite{Name: "trixie", Date: a.Date, InRelease: hex.EncodeToString(sum[:]), Signer: a.Fingerprint(), Trust: tr.Source}, so
}

// TestSandboxImageStage: the sandbox image's digest must be the recipe's
// pin, and an override must give every architecture; either failure stops
// the build before anything is written.
func TestSandboxImageStage(t *testing.T) {
	for _, tc := range []struct {
		name string
		edit func(p *Plan, o *Options)
		want string
	}{
		{"digest not the pin", func(p *Plan, o *Options) {
			p.Recipe.Sandbox.Digest = "sha256:" + strings.Repeat("0", 64)
		}, "sandbox image: " + "%s: sandbox.digest pins sha256:" + strings.Repeat("0", 64) + ", but the sandbox image built from ./cmd/drover-pause is sha256:"},
		{"override without arm64", func(p *Plan, o *Options) {
			p.Recipe.Sandbox.Digest = "sha256:" + strings.Repeat("0", 64)
			delete(o.PauseBins, "arm64")
		}, "sandbox image: Options.PauseBins has no linux/arm64 binary"},
		{"override file missing", func(p *Plan, o *Options) {
			p.Recipe.Sandbox.Digest = "sha256:" + strings.Repeat("0", 64)
			o.PauseBins["amd64"] = "/nonexistent/pause"
		}, "sandbox image: the sandbox image's pause for linux/amd64: open /nonexistent/pause"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			p, o, out := kernelless(t)
			tc.edit(p, &o)
			want := tc.want
			if strings.Contains(want, "%s") {
				want = fmt.Sprintf(want, p.Recipe.Path)
			}
			_, err := Build(context.Background(), p, o)
			if err == nil || !strings.HasPrefix(err.Error(), want) {
				t.Fatalf("error %v\nwant prefix %s", err, want)
			}
			assertNoOutputs(t, out)
		})
	}
}

// TestForgedLockLineStopsTheBuild is the review's reproduction: a rebuilt
// hello with one planted file is in the cache (a mirror in the middle
// served it), and the lock line carries its sha256 and size. The signed
// index lists the real hello, so fetch refuses the line, naming it, before
// anything is unpacked or written.
func TestForgedLockLineStopsTheBuild(t *testing.T) {
	p, o, out := kernelless(t)
	planted, err := debtest.Build(debtest.Deb{
		Control:     map[string]string{"Package": "hello", "Version": "1.0", "Architecture": "amd64"},
		Compression: "gz",
		Entries:     []debtest.Entry{debtest.Dir("./", 0o755), debtest.Dir("./usr/", 0o755), debtest.Dir("./usr/bin/", 0o755), debtest.File("./usr/bin/hello", 0o755, "hi"), debtest.File("./usr/bin/planted", 0o755, "evil")},
	})
	if err != nil {
		t.Fatal(err)
	}
	sum := sha256.Sum256(planted)
	forged := hex.EncodeToString(sum[:])
	if _, err := o.Sources.Cache.Put(forged, bytes.NewReader(planted)); err != nil {
		t.Fatal(err)
	}
	p.Lock.Debs[0].SHA256, p.Lock.Debs[0].Size, p.Lock.Debs[0].Line = forged, int64(len(planted)), 12
	var log bytes.Buffer
	o.Log = &log
	res, err := Build(context.Background(), p, o)
	var le *lockcheck.Error
	if res != nil || !errors.As(err, &le) || len(le.Problems) != 2 || le.Problems[0].Deb.Line != 12 || le.Problems[0].Field != "sha256" || le.Problems[0].Index == forged ||
		le.Problems[1].Field != "size" || le.Problems[1].Index == fmt.Sprint(len(planted)) {
		t.Fatalf("result %v, error %v: want a sha256 and a size problem on line 12", res, err)
	}
	if !strings.HasPrefix(err.Error(), "fetch: "+p.Recipe.LockPath()+":12: deb hello 1.0 amd64: sha256 "+forged+", but the signed trixie index") {
		t.Errorf("error does not name the lock line and the digest:\n%v", err)
	}
	if !strings.Contains(err.Error(), "\na line of "+p.Recipe.LockPath()+" disagrees with the archive's signed index") {
		t.Errorf("error does not count one line:\n%v", err)
	}
	if strings.Contains(log.String(), "build: assemble") {
		t.Errorf("the build went on to unpack packages:\n%s", log.String())
	}
	assertNoOutputs(t, out)
}
