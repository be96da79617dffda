package smoke

import (
	"context"
	"crypto/sha256"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"time"

	"github.com/google/go-containerregistry/pkg/name"
	v1 "github.com/google/go-containerregistry/pkg/v1"
	"github.com/google/go-containerregistry/pkg/v1/remote"
	kubeletv1beta1 "k8s.io/kubelet/config/v1beta1"

	"github.com/drover-os/drover/agent/agent"
	"github.com/drover-os/drover/harness/cluster"
	"github.com/drover-os/drover/harness/registry"
)

// CachedImage is one of the image's cached workload images, as its
// manifest records it: the name pods use (host/repo:tag), the digest it
// is pinned at, and where it ships (root or disk).
type CachedImage struct {
	Name, Digest, Location string
}

// cacheImageLimit bounds the wait for the agent's DroverImageCache=True:
// a large cache imports in the background after the join.
const cacheImageLimit = 15 * time.Minute

// cachedHosts are the registry hosts of the cached images: the smoke's
// node file makes each a mirror of the harness registry, which serves
// the same repositories, so a pod could pull them if the node did not
// hold them; the refusing registry is then the only one the node has.
func cachedHosts(images []CachedImage) []string {
	var hosts []string
	for _, im := range images {
		h, _, _ := strings.Cut(im.Name, "/")
		if !slices.Contains(hosts, h) {
			hosts = append(hosts, h)
		}
	}
	return hosts
}

// copyCacheDisk copies the build's cache disk image into dir (sparse), so
// the boots never write to the build's output. The VMLauncher copies an
// emulated image's data disks (the cache disk publish imported) with it.
func copyCacheDisk(src, dir string) (string, error) {
	f, err := os.Open(src)
	if err != nil {
		return "", fmt.Errorf("the image's cache disk image: %w (drover build writes it beside the image)", err)
	}
	defer f.Close()
	fi, err := f.Stat()
	if err != nil {
		return "", err
	}
	dst := filepath.Join(dir, filepath.Base(src))
	return dst, sparseCopy(dst, f, fi.Size())
}

// checkCachedImages proves the recipe's cached images come from the
// image (its root, or the cache disk attached as a data disk) and never
// from a registry: the agent reports DroverImageCache=True; then, with
// the registry refusing every request (it is the mirror of every cached
// image's host, so nothing else could serve them), a pod of each cached
// image runs to completion while the registry sees no request; the last
// lists containerd's images on the node (its image is the probe's), each
// cached one pinned at its digest. A pod of an image of the same host
// that is not cached shows the refusal: its pull reaches the registry and
// is answered 503.
func (e *Env) checkCachedImages(ctx context.Context, r *Report, in *Instance, want Versions) {
	if len(want.Cached) == 0 {
		return
	}
	s := time.Now()
	name := "image cache loaded: the agent's DroverImageCache condition is True"
	var cond cluster.Condition
	err := pollNode(ctx, cacheImageLimit, func() (bool, error) {
		n, err := e.Cluster.Node(ctx, in.NodeName)
		if err != nil {
			return false, nil
		}
		cond = n.Conditions[agent.ImageCacheCondition]
		if cond.Status == "False" {
			return true, fmt.Errorf("%s=False (%s): %s", agent.ImageCacheCondition, cond.Reason, cond.Message)
		}
		return cond.Status == "True", nil
	})
	if !r.add(name, s, err, cond.Reason+": "+cond.Message) {
		return
	}

	s = time.Now()
	name = "cached images: with every registry refusing, a pod of each runs (root and cache disk), the registry sees no request, containerd holds each pinned"
	// First the kubelet pulls the first cached image's content, by its
	// digest, under the harness registry's own name (it serves the same
	// repositories): it then holds a pull record of that image ID, and
	// under its default credential verification
	// (NeverVerifyPreloadedImages) a pod naming the cached repository
	// would have to pull again (the agent's allowlist,
	// nodeconfig.KubeletConfig, is what spares it).
	first := want.Cached[0]
	_, path, _ := strings.Cut(first.Name, "/")
	repo, _, _ := strings.Cut(path, "@")
	if i := strings.LastIndex(repo, ":"); i > strings.LastIndex(repo, "/") {
		repo = repo[:i]
	}
	if _, err := e.RunPod(ctx, in, "cached-other-name", repo+"@"+first.Digest, nil, false); err != nil {
		r.add(name, s, fmt.Errorf("a pod of %s's content under the harness registry's name (%s@%s), before the refusal: %w (a registry that no longer serves the digest: lock the recipe again)", first.Name, repo, first.Digest, err), "")
		return
	}
	// The kubelet's own record of that pull, read on the node: without it
	// the pods below would not show that the allowlist spares them.
	record, err := e.pullRecord(ctx, in, repo, first.Digest)
	if err != nil {
		r.add(name, s, err, "")
		return
	}
	e.Registry.Refuse(true)
	defer e.Registry.Refuse(false)
	before := len(e.Registry.Requests())
	var probe string
	for i, im := range want.Cached {
		var args []string
		host := false
		// The last one runs as the probe, listing containerd's images
		// (the smoke's cached images are the hello and probe programs):
		// a pod of the cached image, not an exec in the host probe pod
		// (probe.go), since the pod is what is checked.
		if i == len(want.Cached)-1 {
			args, host = []string{"images"}, true
		}
		msg, err := e.runPodRef(ctx, in, fmt.Sprintf("cached-%d", i), im.Name, args, host)
		if err != nil {
			// The registry's side says whether the kubelet pulled it.
			r.add(name, s, fmt.Errorf("%s (%s): %w; %s", im.Name, im.Location, err, requestsSeen(e.Registry.Requests()[before:])), "")
			return
		}
		if host {
			probe = msg
		}
	}
	during := e.Registry.Requests()[before:]

	// The control: an image of the same host the node does not hold.
	mid := len(e.Registry.Requests())
	control := cachedHosts(want.Cached)[0] + "/" + registry.ProbeImage
	_, perr := e.waitPod(ctx, in, "uncached", privatePod(in.NodeName, "uncached", control), 3*time.Minute, func(p *cluster.Pod) (bool, error) {
		for _, w := range p.Waiting {
			if w.Reason == "ErrImagePull" || w.Reason == "ImagePullBackOff" {
				return true, nil
			}
		}
		if p.Phase == "Succeeded" || p.Phase == "Running" {
			return true, fmt.Errorf("pod of %s ran while the registry refused every request", control)
		}
		return false, nil
	})
	e.Cluster.DeletePod(ctx, "default", "uncached")
	detail, err := JudgeCachedImages(want.Cached, probe, during, e.Registry.Requests()[mid:])
	if err == nil && perr != nil {
		err = fmt.Errorf("the control pod of %s: %w", control, perr)
	}
	r.add(name, s, err, record+"; "+detail)
}

// pullRecord reads on the node the kubelet's pull record
// (/var/lib/kubelet/image_manager/pulled, KubeletEnsureSecretPulledImages)
// of the image ID of the harness registry's repo@digest, and judges it.
func (e *Env) pullRecord(ctx context.Context, in *Instance, repo, digest string) (string, error) {
	ref, err := name.NewDigest(e.Registry.Addr()+"/"+repo+"@"+digest, name.Insecure)
	if err != nil {
		return "", err
	}
	img, err := remote.Image(ref, remote.WithContext(ctx), remote.WithPlatform(v1.Platform{OS: "linux", Architecture: in.Config.Arch}))
	if err != nil {
		return "", fmt.Errorf("the image ID of %s: %w", ref, err)
	}
	id, err := img.ConfigName()
	if err != nil {
		return "", err
	}
	path := PulledRecordPath(id.String())
	msg, err := e.probe(ctx, in, "cached-pull-record", []string{"read", path})
	if err != nil {
		return "", fmt.Errorf("reading the kubelet's pull record %s: %w", path, err)
	}
	return JudgePullRecord(msg, path, id.String(), e.GuestRegistry()+"/"+repo)
}

// PulledRecordPath is where the kubelet keeps its record of the pulls of
// an image ID: the file is named by the SHA-256 of the ID
// (k8s.io/kubelet/config/v1beta1 ImagePulledRecord.ImageRef).
func PulledRecordPath(imageID string) string {
	return fmt.Sprintf("/var/lib/kubelet/image_manager/pulled/sha256-%x", sha256.Sum256([]byte(imageID)))
}

// JudgePullRecord: the probe read the record at path (msg, its JSON), and
// it is the kubelet's record of imageID pulled as image (a repository
// without tag or digest) with credentials every pod on the node has.
func JudgePullRecord(msg, path, imageID, image string) (string, error) {
	var f struct {
		Exists  bool
		Content string
		Error   string
	}
	if err := json.Unmarshal([]byte(msg), &f); err != nil {
		return "", fmt.Errorf("the probe's read of %s answered %q: %v", path, msg, err)
	}
	if !f.Exists {
		return "", fmt.Errorf("the kubelet holds no pull record of %s (%s %s): the pull under the registry's name left none, so the cached pods would not show the allowlist", imageID, path, f.Error)
	}
	var rec kubeletv1beta1.ImagePulledRecord
	if err := json.Unmarshal([]byte(f.Content), &rec); err != nil {
		return "", fmt.Errorf("the kubelet's pull record %s: %v: %q", path, err, f.Content)
	}
	if rec.ImageRef != imageID {
		return "", fmt.Errorf("the kubelet's pull record %s is of %s, not %s", path, rec.ImageRef, imageID)
	}
	c, ok := rec.CredentialMapping[image]
	if !ok || !c.NodePodsAccessible {
		return "", fmt.Errorf("the kubelet's pull record %s of %s has no pull of %s by every pod on the node: %s", path, imageID, image, f.Content)
	}
	return fmt.Sprintf("the kubelet's pull record of %s (%s) names %s", imageID, path, strings.TrimSpace(f.Content)), nil
}

// runPodRef is RunPod with the image's full reference.
func (e *Env) runPodRef(ctx context.Context, in *Instance, name, ref string, args []string, host bool) (string, error) {
	ctx, cancel := context.WithTimeout(ctx, 5*time.Minute)
	defer cancel()
	return e.runPodSpec(ctx, in, name, podSpec(in.NodeName, ref, args, host))
}

// pollNode calls f every 2 seconds until it is done, fails or limit
// passes.
func pollNode(ctx context.Context, limit time.Duration, f func() (bool, error)) error {
	ctx, cancel := context.WithTimeout(ctx, limit)
	defer cancel()
	for {
		if done, err := f(); done || err != nil {
			return err
		}
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-time.After(2 * time.Second):
		}
	}
}

// JudgeCachedImages: while the registry refused, the cached images' pods
// made no request (during); containerd on the node (the probe's images
// list) holds each cached image by its name at its digest, pinned; and
// the control pod's pull reached the registry and was refused (control:
// the requests of its window), which shows the refusal was in force.
func JudgeCachedImages(cached []CachedImage, probeMsg string, during, control []registry.Request) (string, error) {
	var probs []string
	if len(during) > 0 {
		probs = append(probs, "the cached images' pods made "+requestsSeen(during))
	}
	pr, err := parseImagesProbe(probeMsg)
	if err != nil {
		return "", err
	}
	if pr.Error != "" {
		probs = append(probs, "containerd's images on the node: "+pr.Error)
	}
	var held []string
	for _, c := range cached {
		i := slices.IndexFunc(pr.Images, func(im nodeImage) bool { return im.Name == c.Name })
		switch {
		case i < 0:
			probs = append(probs, fmt.Sprintf("containerd's image list on the node has no %s (%d images)", c.Name, len(pr.Images)))
		case pr.Images[i].Digest != c.Digest:
			probs = append(probs, fmt.Sprintf("containerd holds %s at %s, the image caches %s", c.Name, pr.Images[i].Digest, c.Digest))
		case pr.Images[i].Labels["io.cri-containerd.pinned"] != "pinned":
			probs = append(probs, fmt.Sprintf("containerd holds %s without the CRI's pinned label (labels %v)", c.Name, pr.Images[i].Labels))
		default:
			held = append(held, fmt.Sprintf("%s@%s (%s)", c.Name, c.Digest, c.Location))
		}
	}
	var refused []string
	for _, q := range control {
		if q.Refused {
			refused = append(refused, q.Method+" "+q.Path)
		}
	}
	if len(refused) == 0 {
		probs = append(probs, fmt.Sprintf("the uncached image's pull was not refused by the registry (%d requests in its window): the refusal is not shown", len(control)))
	}
	if len(probs) > 0 {
		return "", errIf(probs)
	}
	return fmt.Sprintf("pods of %s ran with no registry request; containerd holds each pinned; the registry refused the uncached pull %d times (503: %s)",
		strings.Join(held, ", "), len(refused), refused[0]), nil
}

// requestsSeen names the registry's requests, each answered 503 marked:
// what a pod that should need no registry asked of it.
func requestsSeen(reqs []registry.Request) string {
	if len(reqs) == 0 {
		return "no registry requests"
	}
	var seen []string
	for _, q := range reqs {
		l := q.Method + " " + q.Path
		if q.Refused {
			l += " (503)"
		}
		seen = append(seen, l)
	}
	return fmt.Sprintf("%d registry requests: %s", len(reqs), strings.Join(seen, ", "))
}
