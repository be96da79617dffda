package agent

import (
	"context"
	"fmt"
	"strings"

	"github.com/drover-os/drover/agent/nodeconfig"
)

// PinnedLabel is the label of containerd's CRI that marks an image pinned:
// the CRI reports it so to the kubelet, whose image garbage collection
// never removes a pinned image.
const PinnedLabel = "io.cri-containerd.pinned=pinned"

// importSandbox imports the sandbox image the image ships
// (nodeconfig.SandboxArchive, built from cmd/drover-pause) into
// containerd's CRI namespace and pins it, at every boot, before the
// kubelet starts: no pod sandbox then needs a registry. Importing what is
// already there only re-reads the archive (a few hundred KiB) and sets the
// label again, so a later boot restores an image someone removed. A
// failure fails the containerd phase: with the default sandbox image no
// pod could start, and a node that cannot start pods must not join.
func (a *Agent) importSandbox(ctx context.Context) (string, error) {
	if a.env.Ctr == nil {
		return "sandbox image not imported (no ctr in this environment)", nil
	}
	archive := a.path(nodeconfig.SandboxArchive)
	if !fileExists(archive) {
		return "", fmt.Errorf("importing the sandbox image %s: the image has no %s (it predates drover shipping one): rebuild the image with this drover",
			nodeconfig.DefaultSandboxImage, nodeconfig.SandboxArchive)
	}
	out, err := a.env.Ctr(ctx, "images", "import", "--label", PinnedLabel, archive)
	if err != nil {
		return "", fmt.Errorf("importing the sandbox image %s from %s into containerd: %w: %s",
			nodeconfig.DefaultSandboxImage, nodeconfig.SandboxArchive, err, strings.TrimSpace(string(out)))
	}
	what := "sandbox image " + nodeconfig.DefaultSandboxImage + " imported from " + nodeconfig.SandboxArchive + " and pinned"
	if img := a.node.Containerd.SandboxImage; img != nodeconfig.DefaultSandboxImage {
		what += "; the node file's sandbox image " + img + " is used instead"
	}
	return what, nil
}
