package build

import (
	"archive/tar"
	"bytes"
	"compress/gzip"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"io"
	"os"
	"path"
	"path/filepath"
	"strings"

	"github.com/klauspost/compress/zstd"
	"github.com/ulikunitz/xz"

	"github.com/drover-os/drover/image/attest"
	"github.com/drover-os/drover/image/formats"
	"github.com/drover-os/drover/image/gpt"
	"github.com/drover-os/drover/internal/filehash"
)

// formats writes the qcow2 and vhd the recipe asks for, from the raw image.
func (b *builder) formats(d *diskResult) error {
	raw, err := os.Open(d.RawPath)
	if err != nil {
		return err
	}
	defer raw.Close()
	for _, f := range b.p.Recipe.Image.Formats {
		out := filepath.Join(b.tmp, b.p.Recipe.Name+"."+f)
		switch f {
		case "qcow2":
			w, err := os.Create(out)
			if err != nil {
				return err
			}
			if err := formats.WriteQCOW2(w, raw, d.Size, true); err != nil {
				w.Close()
				return fmt.Errorf("qcow2: %w", err)
			}
			if err := w.Close(); err != nil {
				return err
			}
		case "vhd":
			w, err := os.Create(out)
			if err != nil {
				return err
			}
			if err := formats.WriteVHD(w, io.NewSectionReader(raw, 0, d.Size), d.Size, b.epoch, derive16("vhd-id", d.RootHash)); err != nil {
				w.Close()
				return fmt.Errorf("vhd: %w", err)
			}
			if err := w.Close(); err != nil {
				return err
			}
		}
	}
	return nil
}

// writeManifest records partitions, images and files, and writes the
// manifest, the SPDX SBOM and the provenance statement.
func (b *builder) writeManifest(d *diskResult) error {
	m := b.man
	m.BuildID, m.Cmdline, m.RootHash, m.DiskSize, m.InitrdModules = b.buildID(), d.Cmdline, d.RootHash, d.Size, d.Initrd
	m.Units = enabledUnits(m.Files)
	raw, err := os.Open(d.RawPath)
	if err != nil {
		return err
	}
	defer raw.Close()
	for _, p := range d.Layout.Parts {
		h := sha256.New()
		if _, err := io.Copy(h, io.NewSectionReader(raw, p.Offset, p.Length)); err != nil {
			return err
		}
		m.Partitions = append(m.Partitions, Partition{Index: p.Index, Name: p.Name, Type: gpt.TypeName(p.Type), UUID: p.UUID,
			Offset: p.Offset, Size: p.Length, SHA256: hex.EncodeToString(h.Sum(nil))})
	}
	for _, f := range b.p.Recipe.Image.Formats {
		name := b.p.Recipe.Name + "." + f
		sum, size, err := FileSHA256(filepath.Join(b.tmp, name))
		if err != nil {
			return err
		}
		m.Images = append(m.Images, ImageFile{Format: f, File: name, Size: size, SHA256: sum})
	}
	subjects := make([]Subject, 0, len(m.Images)+2)
	for _, im := range m.Images {
		subjects = append(subjects, Subject{im.File, im.SHA256})
	}
	if m.CachedImages != nil && m.CachedImages.Disk != nil {
		subjects = append(subjects, Subject{m.CachedImages.Disk.File, m.CachedImages.Disk.SHA256})
	}
	spdxDoc, err := sbom(m)
	if err != nil {
		return err
	}
	cdxDoc, err := cycloneDX(m)
	if err != nil {
		return err
	}
	docs := []struct {
		suffix string
		data   []byte
	}{{".manifest.json", m.JSON()}, {".spdx.json", spdxDoc}, {".cdx.json", cdxDoc}}
	for _, d := range docs {
		name := b.p.Recipe.Name + d.suffix
		if err := os.WriteFile(filepath.Join(b.tmp, name), d.data, 0o644); err != nil {
			return err
		}
		subjects = append(subjects, Subject{name, sha(d.data)})
	}
	st, err := Provenance(m, subjects)
	if err != nil {
		return err
	}
	if err := os.WriteFile(filepath.Join(b.tmp, b.p.Recipe.Name+ProvenanceSuffix), st, 0o644); err != nil {
		return err
	}
	if b.o.Signer == nil {
		return nil
	}
	env, err := attest.Sign(context.Background(), st, b.o.Signer)
	if err != nil {
		return err
	}
	return os.WriteFile(filepath.Join(b.tmp, b.p.Recipe.Name+EnvelopeSuffix), env, 0o644)
}

// The provenance files beside the image: the in-toto statement, always,
// and the DSSE envelope signing it when the build is given a key.
const (
	ProvenanceSuffix = ".provenance.json"
	EnvelopeSuffix   = ".provenance.dsse.json"
)

// FileSHA256 returns the hex sha256 and the size of the file at p.
func FileSHA256(p string) (string, int64, error) { return filehash.SHA256(p) }

// publish renames the finished outputs into the output directory. A raw
// image the recipe did not ask for is still kept: it is what `drover run`
// boots and `drover verify` checks.
func (b *builder) publish() ([]string, error) {
	ents, err := os.ReadDir(b.tmp)
	if err != nil {
		return nil, err
	}
	var outs []string
	for _, e := range ents {
		n := e.Name()
		if n == "root.erofs" || n == "root.verity" {
			continue
		}
		dst := filepath.Join(b.p.OutDir, n)
		if err := os.Rename(filepath.Join(b.tmp, n), dst); err != nil {
			return outs, fmt.Errorf("publishing %s: %w", n, err)
		}
		outs = append(outs, dst)
	}
	return outs, nil
}

// urlContent returns a URL component's file, or one member of a tar archive.
func urlContent(p, member string) ([]byte, error) {
	data, err := os.ReadFile(p)
	if err != nil {
		return nil, err
	}
	if member == "" {
		return data, nil
	}
	var r io.Reader = bytes.NewReader(data)
	switch {
	case bytes.HasPrefix(data, []byte{0x1f, 0x8b}):
		if r, err = gzip.NewReader(r); err != nil {
			return nil, err
		}
	case bytes.HasPrefix(data, []byte{0xfd, '7', 'z', 'X', 'Z', 0}):
		if r, err = xz.NewReader(r); err != nil {
			return nil, err
		}
	case bytes.HasPrefix(data, []byte{0x28, 0xb5, 0x2f, 0xfd}):
		zr, err := zstd.NewReader(r)
		if err != nil {
			return nil, err
		}
		defer zr.Close()
		r = zr
	}
	tr := tar.NewReader(r)
	want := path.Clean(strings.TrimPrefix(member, "./"))
	var names []string
	for {
		h, err := tr.Next()
		if err == io.EOF {
			break
		}
		if err != nil {
			return nil, fmt.Errorf("reading archive: %w", err)
		}
		name := path.Clean(strings.TrimPrefix(h.Name, "./"))
		if name == want && h.Typeflag == tar.TypeReg {
			return io.ReadAll(tr)
		}
		if len(names) < 10 && h.Typeflag == tar.TypeReg {
			names = append(names, name)
		}
	}
	return nil, fmt.Errorf("archive has no member %q (it has e.g. %s): fix the recipe's member", member, strings.Join(names, ", "))
}
