package agent

import (
	"context"
	"fmt"

	"github.com/drover-os/drover/agent/nodeconfig"
)

// The label of containerd's CRI that marks an image pinned: the CRI
// reports it so to the kubelet, whose image garbage collection never
// removes a pinned image.
const (
	PinnedLabelKey   = "io.cri-containerd.pinned"
	PinnedLabelValue = "pinned"
)

// importSandbox imports the sandbox image the image ships
// (nodeconfig.SandboxArchive, built from cmd/drover-pause) into
// containerd's CRI namespace and pins it, at every boot, before the
// kubelet starts: no pod sandbox then needs a registry. The agent speaks
// containerd's API itself (agent/containerd): the image has no ctr. An
// import of what is already there writes nothing and only labels again
// what lost its label, so a later boot restores a pin someone removed;
// an image someone removed is created again. containerd's CRI unpacks it
// when the first pod sandbox needs it. A failure fails the sandbox phase
// and with it the join: with the default sandbox image no pod could
// start, and a node that cannot start pods must not join.
func (a *Agent) importSandbox(ctx context.Context) (string, error) {
	if a.env.Images == nil {
		return "sandbox image not imported (no containerd client in this environment)", nil
	}
	archive := a.path(nodeconfig.SandboxArchive)
	if !fileExists(archive) {
		return "", fmt.Errorf("importing the sandbox image %s: the image has no %s (it predates drover shipping one): rebuild the image with this drover",
			nodeconfig.DefaultSandboxImage, nodeconfig.SandboxArchive)
	}
	res, err := a.env.Images(ctx, archive, map[string]string{PinnedLabelKey: PinnedLabelValue})
	if err != nil {
		return "", fmt.Errorf("importing the sandbox image %s from %s into containerd: %w",
			nodeconfig.DefaultSandboxImage, nodeconfig.SandboxArchive, err)
	}
	what := "sandbox image " + nodeconfig.DefaultSandboxImage + " imported from " + nodeconfig.SandboxArchive + " and pinned (" + res.String() + ")"
	if img := a.node.Containerd.SandboxImage; img != nodeconfig.DefaultSandboxImage {
		what += "; the node file's sandbox image " + img + " is used instead"
	}
	return what, nil
}
