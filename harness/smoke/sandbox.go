package smoke

import (
	"context"
	"encoding/json"
	"fmt"
	"slices"
	"strings"
	"time"

	"github.com/drover-os/drover/harness/cluster"
	"github.com/drover-os/drover/harness/registry"
)

// checkSandboxImage proves the node's pod sandboxes come from the image
// and never from a registry. Every pod of the run so far has had a
// sandbox of want.Sandbox, a name no registry the guest can reach serves
// (the harness registry holds no pause image, and the guest has no other
// route out): that they ran at all says the image was in containerd's
// store. Here the evidence is looked at directly: the kubelet lists the
// image with the build's index digest in the Node's status.images,
// containerd's own list (its images service, asked by the probe on the
// node) holds it pinned, and no
// request for any pause image reached the registry. Then, with the
// registry refusing every request, a pod whose image the node already
// holds runs to completion, and the registry saw no request meanwhile.
func (e *Env) checkSandboxImage(ctx context.Context, r *Report, in *Instance, want Versions) {
	s := time.Now()
	name := "sandbox image shipped in the image: the Node lists it with the build's digest, containerd holds it pinned, no registry asked for it"
	msg, err := e.probe(ctx, in, "sandbox-images", []string{"images"})
	var detail string
	if err == nil {
		var n *cluster.Node
		if n, err = e.Cluster.Node(ctx, in.NodeName); err == nil {
			detail, err = JudgeSandboxShipped(want, n.Images, msg, e.Registry.Requests())
		}
	}
	if !r.add(name, s, err, detail) {
		return
	}

	s = time.Now()
	name = "no registry reachable: a pod whose image the node holds runs, and nothing is pulled (sandbox included)"
	before := len(e.Registry.Requests())
	e.Registry.Refuse(true)
	_, err = e.RunPod(ctx, in, "hello-offline", registry.HelloImage, nil, false)
	e.Registry.Refuse(false)
	if err == nil { // RunPod: the pod Succeeded
		detail, err = JudgeOffline(e.Registry.Requests()[before:])
	}
	r.add(name, s, err, detail)
}

// JudgeSandboxShipped: the kubelet's status.images holds want.Sandbox both
// by name and as name@digest (the build's index digest); containerd's
// image records on the node (the probe's "images") hold both names at
// that digest with the CRI's pinned label; the registry was never asked
// for a pause image.
func JudgeSandboxShipped(want Versions, images [][]string, probeMsg string, reqs []registry.Request) (string, error) {
	if want.Sandbox == "" || want.SandboxDigest == "" {
		return "", fmt.Errorf("the image's manifest names no sandbox image")
	}
	var probs []string
	repo, _, _ := strings.Cut(want.Sandbox, ":")
	byDigest := repo + "@" + want.SandboxDigest
	listed := false
	for _, names := range images {
		if slices.Contains(names, want.Sandbox) {
			listed = true
			if !slices.Contains(names, byDigest) {
				probs = append(probs, fmt.Sprintf("the Node lists %s as %s, not as %s", want.Sandbox, strings.Join(names, " "), byDigest))
			}
		}
	}
	if !listed {
		probs = append(probs, fmt.Sprintf("the Node's status.images has no %s (%d images listed)", want.Sandbox, len(images)))
	}
	pr, err := parseImagesProbe(probeMsg)
	if err != nil {
		return "", err
	}
	if pr.Error != "" {
		probs = append(probs, "containerd's images on the node: "+pr.Error)
	}
	var labels string
	for _, ref := range []string{want.Sandbox, byDigest} {
		i := slices.IndexFunc(pr.Images, func(im nodeImage) bool { return im.Name == ref })
		switch {
		case i < 0:
			probs = append(probs, fmt.Sprintf("containerd's image list on the node has no %s (%d images)", ref, len(pr.Images)))
		case pr.Images[i].Digest != want.SandboxDigest:
			probs = append(probs, fmt.Sprintf("containerd holds %s at %s, the build made %s", ref, pr.Images[i].Digest, want.SandboxDigest))
		case pr.Images[i].Labels["io.cri-containerd.pinned"] != "pinned":
			probs = append(probs, fmt.Sprintf("containerd holds %s without the CRI's pinned label (labels %v): the kubelet's image GC may remove it", ref, pr.Images[i].Labels))
		default:
			labels = fmt.Sprint(pr.Images[i].Labels)
		}
	}
	var asked []string
	for _, q := range reqs {
		if strings.Contains(q.Path, "pause") {
			asked = append(asked, q.Method+" "+q.Path)
		}
	}
	if len(asked) > 0 {
		probs = append(probs, "the registry was asked for a pause image: "+strings.Join(asked, ", "))
	}
	if len(probs) > 0 {
		return "", errIf(probs)
	}
	return fmt.Sprintf("Node lists %s; containerd: %s and %s at %s, labels %s; %d registry requests, none for a pause image",
		byDigest, want.Sandbox, byDigest, want.SandboxDigest, labels, len(reqs)), nil
}

// nodeImage is one of containerd's image records, as the probe reports it.
type nodeImage struct {
	Name, Digest string
	Labels       map[string]string
}

// JudgeOffline: while the registry refused, a pod ran to completion (the
// caller's part) and no request reached the registry (reqs are those of
// the window): both its image and its sandbox came from the node's store.
func JudgeOffline(reqs []registry.Request) (string, error) {
	if len(reqs) > 0 {
		var seen []string
		for _, q := range reqs {
			seen = append(seen, q.Method+" "+q.Path)
		}
		return "", fmt.Errorf("the node asked the refusing registry %d times: %s", len(reqs), strings.Join(seen, ", "))
	}
	return "pod Succeeded while the registry refused every request; it saw none", nil
}

// imagesProbe is the probe's answer to "images": containerd's images on
// the node, or why it could not list them.
type imagesProbe struct {
	Images []nodeImage
	Error  string
}

func parseImagesProbe(msg string) (imagesProbe, error) {
	var pr imagesProbe
	if err := json.Unmarshal([]byte(msg), &pr); err != nil {
		return pr, fmt.Errorf("the images probe answered %q: %v", msg, err)
	}
	return pr, nil
}
