package agent

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/drover-os/drover/agent/containerd"
	"github.com/drover-os/drover/agent/kube"
	"github.com/drover-os/drover/agent/nodeconfig"
	"github.com/drover-os/drover/agent/status"
	"github.com/drover-os/drover/agent/storage"
)

const cacheUUID = "0f0f0f0f-0000-4000-8000-000000000000"

// cacheRig is a node whose image caches one image in the root and one on
// the cache disk; the disk's index.json is diskIndex, the image pins
// pinned. importLayout waits until release is closed (or 10 s).
type cacheRig struct {
	*rig
	a       *Agent
	release chan struct{}
	mu      sync.Mutex
	mounts  []string // "dev dir fstype"
	imports []string // "dir labels"
	failDir string   // importLayout fails for this dir
}

func newCacheRig(t *testing.T, diskIndex, pinned string, disks ...storage.Disk) *cacheRig {
	r := newRig(t, userData(t, "hello"))
	c := &cacheRig{rig: r, release: make(chan struct{})}
	sum := sha256.Sum256([]byte(pinned))
	ic := nodeconfig.ImageCache{
		Root: []nodeconfig.CachedImage{{Names: []string{"r.test/app:v1", "r.test/app@sha256:aa"}, Digest: "sha256:aa", Platform: "linux/amd64", Size: 3 << 20}},
		Disk: &nodeconfig.CacheDisk{Label: nodeconfig.ImageCacheLabel, UUID: cacheUUID, Index: hex.EncodeToString(sum[:]),
			Images: []nodeconfig.CachedImage{{Names: []string{"r.test/big:v2", "r.test/big@sha256:bb"}, Digest: "sha256:bb", Platform: "linux/amd64", Size: 5 << 30}}},
	}
	data, _ := json.Marshal(ic)
	os.MkdirAll(filepath.Join(r.root, filepath.Dir(nodeconfig.ImageCacheFile)), 0o755)
	if err := os.WriteFile(filepath.Join(r.root, nodeconfig.ImageCacheFile), data, 0o644); err != nil {
		t.Fatal(err)
	}
	c.a = r.agent()
	c.a.env.Storage = &storage.Fake{List: disks}
	c.a.env.MountReadOnly = func(dev, dir, fstype string) error {
		c.mu.Lock()
		c.mounts = append(c.mounts, dev+" "+dir+" "+fstype)
		c.mu.Unlock()
		// What the mounted disk shows: its layout's index.json.
		return os.WriteFile(filepath.Join(dir, "index.json"), []byte(diskIndex), 0o444)
	}
	c.a.env.ImportLayout = func(ctx context.Context, dir string, labels map[string]string) (containerd.Result, error) {
		// A join that waited for the import would still end, 10 s
		// later, with the import done before it.
		select {
		case <-c.release:
		case <-time.After(10 * time.Second):
		}
		c.mu.Lock()
		defer c.mu.Unlock()
		c.imports = append(c.imports, fmt.Sprint(dir, " ", labels))
		if dir == c.failDir {
			return containerd.Result{}, errors.New("containerd: commit failed: unexpected commit digest sha256:cc, expected sha256:bb: failed precondition")
		}
		return containerd.Result{Written: 3, Created: []string{"r.test/x:v"}}, nil
	}
	return c
}

var cacheDisk = storage.Disk{Name: "vdc", Path: "/dev/vdc", Size: 1 << 30,
	Probe: storage.Probe{Found: true, Type: "erofs", UUID: cacheUUID, Label: nodeconfig.ImageCacheLabel}}

// await waits until the Node has a DroverImageCache condition of status
// want and at least events Events (the reports go out with the health
// watch's, the condition and its Event in separate calls) and returns the
// image cache's conditions and the Events.
func (c *cacheRig) await(t *testing.T, want string, events int) ([]kube.Condition, []string) {
	t.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() { c.a.WatchHealth(ctx, HealthSources{}); close(done) }()
	defer func() { cancel(); <-done }()
	for deadline := time.Now().Add(5 * time.Second); ; time.Sleep(10 * time.Millisecond) {
		c.api.mu.Lock()
		var conds []kube.Condition
		for _, k := range c.api.conds {
			if k.Type == ImageCacheCondition {
				conds = append(conds, k)
			}
		}
		evs := slices.Clone(c.api.events)
		c.api.mu.Unlock()
		if len(conds) > 0 && conds[len(conds)-1].Status == want && len(evs) >= events {
			return conds, evs
		}
		if time.Now().After(deadline) {
			t.Fatalf("no %s=%s with %d Events on the Node: conditions %+v, events %q", ImageCacheCondition, want, events, conds, evs)
		}
	}
}

// The node joins while the import still runs (it waits on release): Ready
// never waits for the cache. Then both layouts are imported pinned, the
// disk mounted read-only from its UUID, and the condition goes from
// Unknown (Loading) to True (Loaded) naming the images.
func TestImageCacheDoesNotHoldUpTheJoin(t *testing.T) {
	c := newCacheRig(t, "the build's index", "the build's index", storage.Disk{Name: "vdb", Path: "/dev/vdb", Size: 2 << 30}, cacheDisk)
	if err := c.a.Run(context.Background()); err != nil {
		t.Fatalf("%v\n%s", err, strings.Join(c.log, "\n"))
	}
	p := phaseNamed(t, c.root, "image cache")
	if p.Result != "ok" || !strings.Contains(p.Detail, "importing 1 cached images (3.0 MiB) from the root (/usr/lib/drover/image-cache) and 1 cached images (5.0 GiB) from the cache disk /dev/vdc") {
		t.Errorf("image cache phase %+v", p)
	}
	// The cache disk is neither container storage nor reported unused.
	if s := phaseNamed(t, c.root, "storage"); !strings.Contains(s.Detail, "container storage on /dev/vdb") || strings.Contains(s.Detail, "vdc") {
		t.Errorf("storage phase %+v", s)
	}
	c.mu.Lock()
	if len(c.imports) != 0 {
		t.Errorf("imported %q before the join ended: the join waited for the import", c.imports)
	}
	if want := "/dev/vdc " + filepath.Join(c.root, nodeconfig.ImageCacheMount) + " erofs"; strings.Join(c.mounts, ";") != want {
		t.Errorf("mounts %q, want %q", c.mounts, want)
	}
	c.mu.Unlock()
	close(c.release)
	conds, events := c.await(t, "True", 0)
	if conds[0].Status != "Unknown" || conds[0].Reason != "Loading" {
		t.Errorf("first condition %+v, want Unknown (Loading)", conds[0])
	}
	last := conds[len(conds)-1]
	if last.Reason != "Loaded" || !strings.Contains(last.Message, "r.test/app@sha256:aa") || !strings.Contains(last.Message, "r.test/big@sha256:bb") {
		t.Errorf("last condition %+v", last)
	}
	if len(events) != 0 {
		t.Errorf("events %q, want none", events)
	}
	want := []string{
		filepath.Join(c.root, nodeconfig.ImageCacheDir) + " map[io.cri-containerd.pinned:pinned]",
		filepath.Join(c.root, nodeconfig.ImageCacheMount) + " map[io.cri-containerd.pinned:pinned]",
	}
	if !slices.Equal(c.imports, want) {
		t.Errorf("imports %q, want %q", c.imports, want)
	}
}

// The cache disk's failures: each leaves the condition False (Failed)
// with an ImageCacheFailed Event naming the cause, and the root's images
// are imported all the same.
func TestImageCacheDiskFailures(t *testing.T) {
	other := cacheDisk
	other.Path, other.Probe.UUID = "/dev/vdd", "1e1e1e1e-0000-4000-8000-000000000000"
	for _, tc := range []struct {
		name           string
		index          string
		disks          []storage.Disk
		failDisk       bool
		want           string
		mounted, files int
	}{
		{name: "no cache disk attached", index: "the build's index", want: "no data disk holds the cache disk's file system (erofs labelled drover-images, UUID " + cacheUUID + ")", files: 1},
		{name: "another build's cache disk", index: "the build's index", disks: []storage.Disk{other},
			want: "/dev/vdd (UUID 1e1e1e1e-0000-4000-8000-000000000000) is another build's", files: 1},
		{name: "index.json not the pinned one", index: "an index with one byte changed", disks: []storage.Disk{cacheDisk},
			want: "the cache disk /dev/vdc holds an index.json of sha256 ", mounted: 1, files: 1},
		{name: "a blob refused by containerd", index: "the build's index", disks: []storage.Disk{cacheDisk}, failDisk: true,
			want: "importing 1 images from the cache disk /dev/vdc: containerd: commit failed: unexpected commit digest", mounted: 1, files: 2},
	} {
		t.Run(tc.name, func(t *testing.T) {
			c := newCacheRig(t, tc.index, "the build's index", tc.disks...)
			if tc.failDisk {
				c.failDir = filepath.Join(c.root, nodeconfig.ImageCacheMount)
			}
			close(c.release)
			if err := c.a.Run(context.Background()); err != nil {
				t.Fatalf("%v\n%s", err, strings.Join(c.log, "\n"))
			}
			conds, events := c.await(t, "False", 1)
			last := conds[len(conds)-1]
			if last.Reason != "Failed" || !strings.Contains(last.Message, tc.want) {
				t.Errorf("condition %+v, want a message with %q", last, tc.want)
			}
			if len(events) != 1 || !strings.HasPrefix(events[0], ImageCacheFailed+": ") || !strings.Contains(events[0], tc.want) {
				t.Errorf("events %q, want one %s naming %q", events, ImageCacheFailed, tc.want)
			}
			c.mu.Lock()
			defer c.mu.Unlock()
			if len(c.mounts) != tc.mounted || len(c.imports) != tc.files {
				t.Errorf("mounts %q, imports %q", c.mounts, c.imports)
			}
			if !strings.HasPrefix(c.imports[0], filepath.Join(c.root, nodeconfig.ImageCacheDir)+" ") {
				t.Errorf("the root's layout not imported: %q", c.imports)
			}
		})
	}
}

// An image without cached images has no image cache phase.
func TestNoImageCachePhase(t *testing.T) {
	r := newRig(t, userData(t, "hello"))
	if err := r.agent().Run(context.Background()); err != nil {
		t.Fatal(err)
	}
	st, err := status.Read(r.root)
	if err != nil {
		t.Fatal(err)
	}
	for _, p := range st.Phases {
		if p.Name == "image cache" {
			t.Errorf("an image cache phase without %s: %+v", nodeconfig.ImageCacheFile, p)
		}
	}
}

// The kubelet the agent configures exempts the cached repositories, root
// and disk, from pull credential verification (nodeconfig.KubeletConfig):
// a pod naming one runs from the cache even after the kubelet pulled the
// same image under another name.
func TestImageCacheExemptsItsRepositories(t *testing.T) {
	c := newCacheRig(t, "the build's index", "the build's index", cacheDisk)
	c.a.env.KubeletVersion = func() (string, error) { return "v1.37.2", nil }
	close(c.release)
	if err := c.a.Run(context.Background()); err != nil {
		t.Fatalf("%v\n%s", err, strings.Join(c.log, "\n"))
	}
	kc, err := os.ReadFile(filepath.Join(c.root, nodeconfig.KubeletConfigPath))
	if err != nil {
		t.Fatal(err)
	}
	want := "imagePullCredentialsVerificationPolicy: NeverVerifyAllowlistedImages\n"
	list := "preloadedImagesVerificationAllowlist:\n- r.test/app\n- r.test/big\n"
	if !strings.Contains(string(kc), want) || !strings.Contains(string(kc), list) {
		t.Errorf("%s does not exempt the cached repositories (want %q and %q):\n%s", nodeconfig.KubeletConfigPath, want, list, kc)
	}
}
