package agent

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"strings"
	"time"

	"github.com/drover-os/drover/agent/containerd"
	"github.com/drover-os/drover/agent/health"
	"github.com/drover-os/drover/agent/nodeconfig"
	"github.com/drover-os/drover/agent/storage"
	"github.com/drover-os/drover/internal/bytesize"
)

// The image cache's Node condition and Event (docs/agent.md, "The image
// cache"): the condition is Unknown (Loading) from the join until the
// import ends, then True (Loaded) or False (Failed, the reason in its
// message, and a Warning Event ImageCacheFailed).
const (
	ImageCacheCondition = "DroverImageCache"
	ImageCacheFailed    = "ImageCacheFailed"
)

// imageCacheDeadline bounds the import of a large cache: it runs beside
// the join and after it, never holding up Ready.
const imageCacheDeadline = time.Hour

// imageCache is the image cache phase, once containerd is active: it reads
// what the image's cache holds (nodeconfig.ImageCacheFile), finds and
// mounts the cache disk when images ship on one, then starts the import,
// which goes on beside the join and after it: Ready never waits for a
// large cache. The condition DroverImageCache says when it is loaded.
func (a *Agent) imageCache(ctx context.Context) (string, error) {
	c, err := a.readImageCache()
	if errors.Is(err, fs.ErrNotExist) {
		return "no image cache in the image", nil
	}
	if err != nil {
		return "", err
	}
	if a.env.ImportLayout == nil {
		return "image cache not imported (no containerd client in this environment)", nil
	}
	var jobs []imageJob
	var problems []string
	if len(c.Root) > 0 {
		jobs = append(jobs, imageJob{where: "the root (" + nodeconfig.ImageCacheDir + ")", dir: a.path(nodeconfig.ImageCacheDir), images: c.Root})
	}
	if c.Disk != nil {
		dir, dev, err := a.mountCacheDisk(*c.Disk)
		if err != nil {
			problems = append(problems, fmt.Sprintf("%d images of the cache disk are not imported (pods using them pull from their registries): %v", len(c.Disk.Images), err))
		} else {
			jobs = append(jobs, imageJob{where: "the cache disk " + dev, dir: dir, images: c.Disk.Images})
		}
	}
	a.reportImages(health.Finding{Condition: ImageCacheCondition, Status: "Unknown", Reason: "Loading", Evidence: describeJobs(jobs)})
	go a.importImages(context.WithoutCancel(ctx), jobs, problems)
	return "importing " + describeJobs(jobs) + strings.Join(append([]string{""}, problems...), "; "), nil
}

// readImageCache reads what the image's cache holds
// (nodeconfig.ImageCacheFile); an error wrapping fs.ErrNotExist when the
// image has no cache.
func (a *Agent) readImageCache() (nodeconfig.ImageCache, error) {
	var c nodeconfig.ImageCache
	data, err := os.ReadFile(a.path(nodeconfig.ImageCacheFile))
	if err != nil {
		return c, err
	}
	if err := json.Unmarshal(data, &c); err != nil {
		return c, fmt.Errorf("%s: %w (the build wrote it: rebuild the image)", nodeconfig.ImageCacheFile, err)
	}
	return c, nil
}

// imageJob is one layout to import.
type imageJob struct {
	where, dir string
	images     []nodeconfig.CachedImage
}

func describeJobs(jobs []imageJob) string {
	if len(jobs) == 0 {
		return "no cached images"
	}
	var parts []string
	for _, j := range jobs {
		var size int64
		for _, im := range j.images {
			size += im.Size
		}
		parts = append(parts, fmt.Sprintf("%d cached images (%s) from %s", len(j.images), bytesize.Format(size), j.where))
	}
	return strings.Join(parts, " and ")
}

// mountCacheDisk finds the cache disk among the data disks by its file
// system (erofs, nodeconfig.ImageCacheLabel, the UUID the build gave it),
// mounts it read-only in the agent's own mount namespace and checks its
// layout's index.json against the sha256 the build pinned: index.json
// names every image by digest, and every blob is checked against its
// digest as it is imported.
func (a *Agent) mountCacheDisk(want nodeconfig.CacheDisk) (dir, dev string, err error) {
	if a.env.Storage == nil || a.env.MountReadOnly == nil {
		return "", "", errors.New("no disk observer in this environment")
	}
	disks, err := a.env.Storage.Disks()
	if err != nil {
		return "", "", fmt.Errorf("observing the data disks: %w", err)
	}
	var seen []string
	for _, d := range disks {
		if !storage.IsImageCache(d) {
			continue
		}
		if d.Probe.UUID != want.UUID {
			seen = append(seen, d.Path+" (UUID "+d.Probe.UUID+")")
			continue
		}
		dir = a.path(nodeconfig.ImageCacheMount)
		if err := os.MkdirAll(dir, 0o700); err != nil {
			return "", "", err
		}
		if err := a.env.MountReadOnly(d.Path, dir, "erofs"); err != nil {
			return "", "", fmt.Errorf("mounting the cache disk %s: %w", d.Path, err)
		}
		index, err := os.ReadFile(filepath.Join(dir, "index.json"))
		if err != nil {
			return "", "", fmt.Errorf("the cache disk %s: %w", d.Path, err)
		}
		if sum := sha256.Sum256(index); hex.EncodeToString(sum[:]) != want.Index {
			return "", "", fmt.Errorf("the cache disk %s holds an index.json of sha256 %s, the image pins %s: it is not the disk this image was built with", d.Path, hex.EncodeToString(sum[:]), want.Index)
		}
		return dir, d.Path, nil
	}
	msg := fmt.Sprintf("no data disk holds the cache disk's file system (erofs labelled %s, UUID %s): attach a disk made from the snapshot of the build's cache disk image", want.Label, want.UUID)
	if len(seen) > 0 {
		msg += "; " + strings.Join(seen, ", ") + " is another build's"
	}
	return "", "", errors.New(msg)
}

// importImages imports each layout into containerd's CRI namespace,
// pinned (the kubelet's image garbage collection never removes them), and
// reports the outcome on the Node.
func (a *Agent) importImages(ctx context.Context, jobs []imageJob, problems []string) {
	ctx, cancel := context.WithTimeout(ctx, imageCacheDeadline)
	defer cancel()
	start := time.Now()
	var done []string
	for _, j := range jobs {
		js := time.Now()
		res, err := a.env.ImportLayout(ctx, j.dir, map[string]string{PinnedLabelKey: PinnedLabelValue})
		if err != nil {
			problems = append(problems, fmt.Sprintf("importing %d images from %s: %v", len(j.images), j.where, err))
			continue
		}
		var names []string
		for _, im := range j.images {
			names = append(names, im.Names[len(im.Names)-1])
		}
		done = append(done, fmt.Sprintf("from %s in %s: %s (%s)", j.where, time.Since(js).Round(100*time.Millisecond), strings.Join(names, ", "), res))
	}
	took := time.Since(start).Round(100 * time.Millisecond)
	if len(problems) > 0 {
		msg := strings.Join(problems, "; ")
		if len(done) > 0 {
			msg += "; imported " + strings.Join(done, "; ")
		}
		a.rec.Note("image cache: failed after " + took.String() + ": " + msg)
		a.reportImages(health.Finding{Condition: ImageCacheCondition, Status: "False", Reason: "Failed", Evidence: msg})
		a.reportImages(health.Finding{Event: ImageCacheFailed, Evidence: msg})
		return
	}
	msg := fmt.Sprintf("loaded in %s, pinned: %s", took, strings.Join(done, "; "))
	a.rec.Note("image cache: " + msg)
	a.reportImages(health.Finding{Condition: ImageCacheCondition, Status: "True", Reason: "Loaded", Evidence: msg})
}

// reportImages queues a finding for WatchHealth, which delivers it once
// the node has joined.
func (a *Agent) reportImages(f health.Finding) {
	select {
	case a.imageReports <- f:
	default:
		a.rec.Note("image cache: report dropped (queue full): " + f.Evidence)
	}
}

// importLayout is Env.ImportLayout's production value.
func importLayout(ctx context.Context, dir string, labels map[string]string) (containerd.Result, error) {
	l, err := containerd.ReadLayoutDir(dir)
	if err != nil {
		return containerd.Result{}, fmt.Errorf("%s: %w", dir, err)
	}
	c := containerd.New(containerd.Socket, containerd.CRINamespace)
	defer c.Close()
	return c.Import(ctx, l, labels)
}

// ImportLayout imports the OCI image layout directory into the node's
// containerd (Env.ImportLayout's value for drover-agent).
var ImportLayout = importLayout
