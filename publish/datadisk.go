package publish

import (
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"io"
	"os"
)

// objects are the plan's OSS objects: the image's, then each data disk's.
func (p *Plan) objects() []string {
	out := []string{p.Object}
	for _, d := range p.DataDisks {
		out = append(out, d.Object)
	}
	return out
}

// checkDataDisks compares each data disk file with the manifest (size,
// then sha256), so that an image is never imported with a cache disk of
// another build: the agent would find no disk of the UUID it pins.
func (p *Plan) checkDataDisks() error {
	for _, d := range p.DataDisks {
		f, err := os.Open(d.File)
		if err != nil {
			return fmt.Errorf("cache disk image: %w: drover build writes it beside the image; publish the files it wrote together", err)
		}
		h := sha256.New()
		n, err := io.Copy(h, f)
		f.Close()
		if err != nil {
			return fmt.Errorf("reading cache disk image %s: %w", d.File, err)
		}
		if got := hex.EncodeToString(h.Sum(nil)); n != d.Size || got != d.SHA256 {
			return fmt.Errorf("refusing to publish: cache disk image %s does not match the manifest (%d bytes, sha256 %s; the manifest has %d bytes, sha256 %s): "+
				"copy it from the same build output as %s, or rebuild", d.File, n, got, d.Size, d.SHA256, p.Image)
		}
	}
	return nil
}
