// Package verify re-checks a built disk image against its manifest
// (`drover verify`): the image file's sha256, the GPT, every partition's
// sha256, the dm-verity hash tree against the root partition and the root
// hash, and every file of the ESP including the loader entry's root hash.
//
// Verify reports every difference it finds, not only the first, each naming
// the partition it is in (or the GPT, or the image as a whole) and what to
// do; an empty result means the image is the one the manifest describes.
// It only reads the image.
package verify

import (
	"bytes"
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"hash"
	"io"
	"os"
	"path/filepath"
	"strings"

	"github.com/drover-os/drover/image/build"
)

// Names of the parts a Problem can be in besides the manifest's partition
// names (esp, root, root-verity).
const (
	PartImage    = "image"    // the image file as a whole
	PartGPT      = "gpt"      // the partition table
	PartManifest = "manifest" // the manifest itself cannot describe this image
)

// Problem is one difference between the image and its manifest.
type Problem struct {
	Part    string `json:"part"`
	Message string `json:"message"`
}

func (p Problem) String() string { return p.Part + ": " + p.Message }

const (
	qcow2Magic  = "QFI\xfb"
	vhdCookie   = "conectix"
	vhdFooter   = 512
	readChunk   = 4 << 20
	rebuildHint = "re-copy the image from the build output, or rebuild it"
)

// verifier carries one run: the image, its manifest and what was found.
type verifier struct {
	img      io.ReaderAt // the disk data (a VHD's footer excluded)
	file     *os.File
	size     int64 // bytes of disk data
	name     string
	format   string // FormatRaw or FormatVHD
	m        *build.Manifest
	problems []Problem
	// partSHA is each manifest partition's sha256 as read, by name.
	partSHA map[string]string
	// imageSHAMismatch is set when the file's sha256 is not the manifest's.
	imageSHAMismatch bool
}

func (v *verifier) add(part, format string, args ...any) {
	v.problems = append(v.problems, Problem{Part: part, Message: fmt.Sprintf(format, args...)})
}

// Verify checks the raw (or fixed VHD) image at imagePath against m and
// returns every problem found; none means the image matches. A qcow2 image
// is not read: convert it, verify the raw image it was made from, or check
// it by its digest against the signed provenance (SignedDigest).
func Verify(imagePath string, m *build.Manifest) []Problem {
	f, err := os.Open(imagePath)
	if err != nil {
		return []Problem{{PartImage, fmt.Sprintf("opening %s: %v: pass the .raw image drover build wrote", imagePath, err)}}
	}
	defer f.Close()
	st, err := f.Stat()
	if err != nil {
		return []Problem{{PartImage, fmt.Sprintf("reading %s: %v", imagePath, err)}}
	}
	v := &verifier{img: f, file: f, size: st.Size(), name: filepath.Base(imagePath), format: detectFormat(f, st.Size()), m: m, partSHA: map[string]string{}}
	switch v.format {
	case FormatQCOW2:
		base := trimExt(v.name)
		return []Problem{{PartImage, fmt.Sprintf("%s is a qcow2 image, whose clusters are stored out of order and compressed: verify the raw image it was made from (%s.raw beside it), or convert it first: qemu-img convert -O raw %s %s-copy.raw && drover verify --manifest %s.manifest.json %s-copy.raw; "+
			"or check it by its digest against the signed provenance, without re-reading what is inside: drover verify --provenance --pub KEY.pub %s",
			v.name, base, v.name, base, base, base, v.name)}}
	case FormatVHD:
		// A fixed VHD is the raw disk followed by a 512-byte footer.
		v.size = st.Size() - vhdFooter
	}
	v.img = io.NewSectionReader(f, 0, v.size)

	v.checkFile()
	v.checkGPT()
	v.checkPartitionDigests()
	v.checkVerity()
	v.checkESP()
	if len(v.problems) == 1 && v.problems[0].Part == PartImage && v.imageSHAMismatch {
		v.problems[0].Message = strings.Replace(v.problems[0].Message, "(the other problems say where it differs)",
			"although no GPT entry, partition or ESP file differs: the change is outside the partitions (GPT header fields, the gaps between partitions)", 1) + "; " + rebuildHint
	}
	return v.problems
}

// The image formats verify tells apart, named as in the manifest's images.
const (
	FormatRaw   = "raw"
	FormatVHD   = "vhd"
	FormatQCOW2 = "qcow2"
)

// Format returns the format of the image file at imagePath: FormatQCOW2,
// FormatVHD (a fixed VHD) or FormatRaw. Verify reads the first two in place
// and refuses a qcow2, which SignedDigest checks by its sha256.
func Format(imagePath string) (string, error) {
	f, err := os.Open(imagePath)
	if err != nil {
		return "", err
	}
	defer f.Close()
	st, err := f.Stat()
	if err != nil {
		return "", err
	}
	return detectFormat(f, st.Size()), nil
}

func detectFormat(f io.ReaderAt, size int64) string {
	head := make([]byte, len(qcow2Magic))
	if _, err := f.ReadAt(head, 0); err == nil && string(head) == qcow2Magic {
		return FormatQCOW2
	}
	if size > vhdFooter {
		tail := make([]byte, len(vhdCookie))
		if _, err := f.ReadAt(tail, size-vhdFooter); err == nil && string(tail) == vhdCookie {
			return FormatVHD
		}
	}
	return FormatRaw
}

func trimExt(p string) string { return p[:len(p)-len(filepath.Ext(p))] }

// checkFile hashes the whole image file in one pass, feeding each
// partition's hasher on the way, and compares the file with m.Images.
func (v *verifier) checkFile() {
	if v.size != v.m.DiskSize {
		v.add(PartImage, "the disk is %d bytes, the manifest says %d: a resized or truncated copy; %s", v.size, v.m.DiskSize, rebuildHint)
	}
	type span struct {
		name     string
		off, end int64
		h        hash.Hash
	}
	var spans []*span
	for _, p := range v.m.Partitions {
		spans = append(spans, &span{p.Name, p.Offset, p.Offset + p.Size, sha256.New()})
	}
	whole := sha256.New()
	buf := make([]byte, readChunk)
	var off int64
	for {
		n, err := v.file.ReadAt(buf, off)
		if n > 0 {
			whole.Write(buf[:n])
			for _, s := range spans {
				lo, hi := max(s.off, off), min(s.end, off+int64(n), v.size)
				if lo < hi {
					s.h.Write(buf[lo-off : hi-off])
				}
			}
			off += int64(n)
		}
		if err == io.EOF {
			break
		}
		if err != nil {
			v.add(PartImage, "reading %s at byte %d: %v", v.name, off, err)
			return
		}
	}
	for _, s := range spans {
		if s.end <= v.size {
			v.partSHA[s.name] = hex.EncodeToString(s.h.Sum(nil))
		}
	}
	sum := hex.EncodeToString(whole.Sum(nil))
	for _, im := range v.m.Images {
		if im.Format != v.format {
			continue
		}
		if im.SHA256 != sum {
			v.imageSHAMismatch = true
			v.add(PartImage, "sha256 of %s is %s, the manifest's %s has %s: the image is not the one built (the other problems say where it differs)",
				v.name, sum, im.File, im.SHA256)
		}
		return
	}
}

// checkPartitionDigests compares each partition's content with the
// manifest; the verity and ESP checks then say where inside it differs.
func (v *verifier) checkPartitionDigests() {
	for _, p := range v.m.Partitions {
		got, ok := v.partSHA[p.Name]
		if !ok {
			v.add(p.Name, "the partition (bytes %d-%d) lies past the end of the %d-byte image: the image is truncated; %s",
				p.Offset, p.Offset+p.Size-1, v.size, rebuildHint)
			continue
		}
		if got != p.SHA256 {
			v.add(p.Name, "sha256 of the partition (%d bytes at image offset %d) is %s, the manifest says %s: its content was modified; %s",
				p.Size, p.Offset, got, p.SHA256, rebuildHint)
		}
	}
}

func (v *verifier) partition(name string) (build.Partition, bool) {
	for _, p := range v.m.Partitions {
		if p.Name == name {
			return p, true
		}
	}
	return build.Partition{}, false
}

// section returns a reader of a partition's bytes, or nil (and a problem)
// when the manifest lacks it or the image is too short for it.
func (v *verifier) section(name string) *io.SectionReader {
	p, ok := v.partition(name)
	if !ok {
		v.add(PartManifest, "the manifest lists no %q partition: it does not describe a drover image; pass the manifest written with the image", name)
		return nil
	}
	if p.Offset < 0 || p.Size <= 0 || p.Offset+p.Size > v.size {
		return nil // checkPartitionDigests reported it
	}
	return io.NewSectionReader(v.img, p.Offset, p.Size)
}

// allZero reports whether r holds only zero bytes; used to tell padding
// that was never written from padding that was.
func allZero(r io.Reader) bool {
	buf := make([]byte, 64<<10)
	zero := make([]byte, len(buf))
	for {
		n, err := r.Read(buf)
		if !bytes.Equal(buf[:n], zero[:n]) {
			return false
		}
		if err != nil {
			return true
		}
	}
}
