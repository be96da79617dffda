package verify

import (
	"context"
	"fmt"
	"path/filepath"
	"strings"

	"github.com/secure-systems-lab/go-securesystemslib/dsse"

	"github.com/drover-os/drover/image/build"
)

// SignedDigest checks an image the only way left when Verify cannot read it
// in place (a qcow2): the file's size and sha256 against the manifest's
// images entry of its format, and the signed provenance with every subject
// (Provenance), which makes the image and the manifest subjects of the
// signed statement. Nothing inside the image is read: NotReread names what
// only its sha256 vouches for. A digest checked against an unsigned
// manifest proves nothing, hence no Digest without the provenance.
func SignedDigest(ctx context.Context, imagePath, manifestPath string, m *build.Manifest, v dsse.Verifier, want Expect) []Problem {
	return append(digest(imagePath, m), Provenance(ctx, imagePath, manifestPath, m, v, want)...)
}

func digest(imagePath string, m *build.Manifest) []Problem {
	name := filepath.Base(imagePath)
	format, err := Format(imagePath)
	if err != nil {
		return []Problem{{PartImage, fmt.Sprintf("reading %s: %v: pass an image drover build wrote", imagePath, err)}}
	}
	var im *build.ImageFile
	var listed []string
	for i := range m.Images {
		listed = append(listed, m.Images[i].Format+" "+m.Images[i].File)
		if m.Images[i].Format == format {
			im = &m.Images[i]
		}
	}
	if im == nil {
		if len(listed) == 0 {
			listed = []string{"none"}
		}
		return []Problem{{PartManifest, fmt.Sprintf("the manifest's images list no %s file (it lists: %s), so %s cannot be checked by its digest: pass the manifest written with the image",
			format, strings.Join(listed, ", "), name)}}
	}
	sum, size, err := build.FileSHA256(imagePath)
	if err != nil {
		return []Problem{{PartImage, fmt.Sprintf("reading %s: %v", imagePath, err)}}
	}
	var ps []Problem
	if size != im.Size {
		ps = append(ps, Problem{PartImage, fmt.Sprintf("%s is %d bytes, the manifest's %s has %d: a truncated or changed copy; %s", name, size, im.File, im.Size, rebuildHint)})
	}
	if sum != im.SHA256 {
		ps = append(ps, Problem{PartImage, fmt.Sprintf("sha256 of %s is %s, the manifest's %s has %s: the image is not the one built; %s", name, sum, im.File, im.SHA256, rebuildHint)})
	}
	return ps
}

// NotReread returns the parts of m's image SignedDigest vouches for only
// through the file's sha256, without reading them: the GPT and every
// partition (and so the dm-verity tree and the ESP's files).
func NotReread(m *build.Manifest) []string {
	parts := []string{PartGPT}
	for _, p := range m.Partitions {
		parts = append(parts, p.Name)
	}
	return parts
}
