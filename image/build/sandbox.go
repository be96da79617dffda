package build

import (
	"context"
	"fmt"
	"os"
	"strings"

	"github.com/drover-os/drover/agent/nodeconfig"
	"github.com/drover-os/drover/image/oci"
	"github.com/drover-os/drover/image/tree"
)

// PausePackage is the program of the sandbox image, in DroverModule.
const PausePackage = "./cmd/drover-pause"

// sandboxImage builds the pod sandbox image every drover image ships: the
// pause program for each architecture of oci.Arches, one OCI index named
// nodeconfig.DefaultSandboxImage, packed as an OCI layout at
// nodeconfig.SandboxArchive for the agent to import into containerd at
// boot. Both architectures go in, as an upstream pause index has them: the
// digest is then the same on amd64 and arm64 nodes, and one pin in the
// recipe (sandbox.digest) covers both. A digest other than the pin fails
// the build, before anything is written.
//
// A recipe that pins no sandbox image (minimal.yaml: no container runtime)
// ships none.
func (b *builder) sandboxImage(ctx context.Context) error {
	if b.p.Recipe.Sandbox.Digest == "" {
		b.logf("build: no sandbox image: %s pins none (sandbox.digest)", b.p.Recipe.Path)
		return nil
	}
	bins := map[string][]byte{}
	var pause []OwnFile
	for _, goarch := range oci.Arches {
		data, how, err := b.pauseBinary(ctx, goarch)
		if err != nil {
			return err
		}
		bins[goarch] = data
		m := &Manifest{}
		m.addOwn("linux/"+goarch, data, how)
		pause = append(pause, m.Own[0])
	}
	idx, err := oci.ProgramIndex("pause", bins, oci.PlainLayers)
	if err != nil {
		return err
	}
	digest, err := idx.Digest()
	if err != nil {
		return err
	}
	if pin := b.p.Recipe.Sandbox.Digest; pin != digest.String() {
		return fmt.Errorf("%s: sandbox.digest pins %s, but the sandbox image built from %s is %s: the pause program or the Go toolchain changed; review the change, then set sandbox.digest to %s",
			b.p.Recipe.Path, pin, PausePackage, digest, digest)
	}
	im, err := idx.IndexManifest()
	if err != nil {
		return err
	}
	platforms := map[string]string{}
	for _, m := range im.Manifests {
		platforms[m.Platform.String()] = m.Digest.String()
	}
	archive, err := oci.LayoutTar(idx, nodeconfig.DefaultSandboxImage, b.tmp)
	if err != nil {
		return err
	}
	if err := b.tree.Set(&tree.Node{Path: nodeconfig.SandboxArchive, Kind: tree.Regular, Mode: 0o644, Data: archive, Owner: "drover"}); err != nil {
		return err
	}
	b.man.Sandbox = &SandboxImage{Name: nodeconfig.DefaultSandboxImage, Digest: digest.String(), Platforms: platforms,
		Path: nodeconfig.SandboxArchive, SHA256: sha(archive), Pause: pause}
	b.logf("build: sandbox image %s@%s from %s, as the recipe pins", nodeconfig.DefaultSandboxImage, digest, PausePackage)
	return nil
}

// pauseBinary is the pause program for goarch: the file given for it
// (Options.PauseBins), else built from the checkout with the lock's
// toolchain.
func (b *builder) pauseBinary(ctx context.Context, goarch string) ([]byte, OwnSource, error) {
	if len(b.o.PauseBins) > 0 {
		path, ok := b.o.PauseBins[goarch]
		if !ok {
			return nil, OwnSource{}, fmt.Errorf("Options.PauseBins has no linux/%s binary: the sandbox image holds one per architecture (%s), built from %s", goarch, strings.Join(oci.Arches, ", "), PausePackage)
		}
		data, err := os.ReadFile(path)
		if err != nil {
			return nil, OwnSource{}, fmt.Errorf("the sandbox image's pause for linux/%s: %w", goarch, err)
		}
		return data, OwnSource{Built: "override", From: path}, nil
	}
	if b.o.Source == nil {
		return nil, OwnSource{}, fmt.Errorf("no checkout of %s to build the sandbox image's pause (%s) from: run drover from its checkout", DroverModule, PausePackage)
	}
	return b.buildOwn(ctx, PausePackage, "the sandbox image's pause for linux/"+goarch, goarch)
}
