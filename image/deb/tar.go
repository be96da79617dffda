package deb

import (
	"archive/tar"
	"bufio"
	"fmt"
	"io"
	"strings"

	"github.com/klauspost/compress/gzip"
	"github.com/klauspost/compress/zstd"
	"github.com/ulikunitz/xz"

	"github.com/drover-os/drover/image/tree"
)

// readBuf sizes the buffer between the ar member and the decompressor. The
// xz decoder pulls its input one byte at a time; unbuffered, that would be a
// read system call per byte of a file. Measured: from 4 KiB up the size
// makes no difference (the LZMA decoder itself is the cost, ~30 MB/s of
// output per core), so this is just comfortably large.
const readBuf = 256 << 10

// maxFileSize bounds a single file: the whole tree is held in memory, and
// a corrupt size field must not allocate tens of gigabytes.
const maxFileSize = 4 << 30

// maxControlSize bounds the control file, which is a few KiB in practice.
const maxControlSize = 1 << 20

// decompress returns a reader of the tar inside the ar member name, the
// compression's short name, and a function releasing the decoder.
func decompress(r io.Reader, name string) (io.Reader, string, func(), error) {
	noop := func() {}
	ext := strings.TrimPrefix(strings.TrimPrefix(name, "control.tar"), "data.tar")
	switch ext {
	case "":
		return r, "none", noop, nil
	case ".xz":
		// SingleStream: a member holds one xz stream; anything after it
		// is corruption worth reporting. (It does not change speed.)
		zr, err := xz.ReaderConfig{SingleStream: true}.NewReader(bufio.NewReaderSize(r, readBuf))
		if err != nil {
			return nil, "", nil, fmt.Errorf("opening %s: %w", name, err)
		}
		return zr, "xz", noop, nil
	case ".zst":
		// One goroutine per decoder: ExtractAll already runs one decoder
		// per core, and synchronous decoding is faster for small members.
		zr, err := zstd.NewReader(bufio.NewReaderSize(r, readBuf), zstd.WithDecoderConcurrency(1))
		if err != nil {
			return nil, "", nil, fmt.Errorf("opening %s: %w", name, err)
		}
		return zr, "zst", zr.Close, nil
	case ".gz":
		zr, err := gzip.NewReader(bufio.NewReaderSize(r, readBuf))
		if err != nil {
			return nil, "", nil, fmt.Errorf("opening %s: %w", name, err)
		}
		return zr, "gz", noop, nil
	}
	return nil, "", nil, fmt.Errorf("%s: unsupported compression %q (drover reads xz, zst, gz and plain tar)", name, ext)
}

// readDataTar converts the entries of data.tar.* into nodes owned by pkg.
func readDataTar(r io.Reader, member, pkg string, opt Options, st *Stats) ([]*tree.Node, error) {
	zr, comp, done, err := decompress(r, member)
	if err != nil {
		return nil, fmt.Errorf("extracting %s: %w", pkg, err)
	}
	defer done()
	st.Compression = comp
	if opt.tee != nil {
		zr = io.TeeReader(zr, opt.tee)
		// The tar reader stops at the end-of-archive marker; keep the
		// rest too, so the kept copy is the whole stream.
		defer io.Copy(io.Discard, zr)
	}

	var (
		nodes   []*tree.Node
		seen    = map[string]*tree.Node{} // for hard links, which name an earlier entry
		skipped = map[string]bool{}
		tr      = tar.NewReader(zr)
	)
	for {
		hdr, err := tr.Next()
		if err == io.EOF {
			return nodes, nil
		}
		if err != nil {
			return nil, fmt.Errorf("extracting %s: reading %s after %d entries: %w", pkg, member, len(nodes), err)
		}
		p := tree.Canonical(hdr.Name)
		aside := opt.Aside != nil && hdr.Typeflag == tar.TypeReg && hdr.Size >= 0 && hdr.Size <= MaxAside && opt.Aside.Want(p)
		if p != "/" && opt.Skip != nil && opt.Skip(p) {
			st.Skipped++
			skipped[p] = true
			if aside {
				data := make([]byte, hdr.Size)
				if _, err := io.ReadFull(tr, data); err != nil {
					return nil, fmt.Errorf("extracting %s: %s: reading content: %w", pkg, hdr.Name, noEOF(err))
				}
				opt.Aside.Put(pkg, p, data)
			}
			continue
		}
		n, err := entryNode(tr, hdr, p, pkg, seen, skipped, st)
		if err != nil {
			return nil, fmt.Errorf("extracting %s: %s: %w", pkg, hdr.Name, err)
		}
		if aside {
			opt.Aside.Put(pkg, p, n.Data)
		}
		seen[p] = n
		nodes = append(nodes, n)
	}
}

// entryNode builds the node for one tar entry, reading a regular file's
// content from tr.
func entryNode(tr *tar.Reader, hdr *tar.Header, p, pkg string, seen map[string]*tree.Node, skipped map[string]bool, st *Stats) (*tree.Node, error) {
	if hdr.Uid < 0 || hdr.Gid < 0 || int64(hdr.Uid) > 1<<32-1 || int64(hdr.Gid) > 1<<32-1 {
		return nil, fmt.Errorf("owner %d:%d out of range", hdr.Uid, hdr.Gid)
	}
	n := &tree.Node{
		Path:   p,
		Mode:   uint32(hdr.Mode) & 0o7777,
		UID:    uint32(hdr.Uid),
		GID:    uint32(hdr.Gid),
		Xattrs: xattrs(hdr),
		Owner:  pkg,
	}
	switch hdr.Typeflag {
	case tar.TypeReg, tar.TypeCont: // archive/tar already turns the legacy TypeRegA into TypeReg
		if hdr.Size < 0 || hdr.Size > maxFileSize {
			return nil, fmt.Errorf("file size %d out of range", hdr.Size)
		}
		n.Kind = tree.Regular
		n.Data = make([]byte, hdr.Size)
		if _, err := io.ReadFull(tr, n.Data); err != nil {
			return nil, fmt.Errorf("reading content: %w", noEOF(err))
		}
		st.Files++
		st.Bytes += hdr.Size
	case tar.TypeDir:
		n.Kind = tree.Dir
		st.Dirs++
	case tar.TypeSymlink:
		if hdr.Linkname == "" {
			return nil, fmt.Errorf("symlink with an empty target")
		}
		n.Kind = tree.Symlink
		n.Target = hdr.Linkname
		st.Symlinks++
	case tar.TypeLink:
		target := tree.Canonical(hdr.Linkname)
		old := seen[target]
		switch {
		case old == nil && skipped[target]:
			return nil, fmt.Errorf("hard link to %s, which Options.Skip dropped: skip both paths or neither", target)
		case old == nil:
			return nil, fmt.Errorf("hard link to %s, which the package does not ship before it", target)
		case old.Kind == tree.Dir:
			return nil, fmt.Errorf("hard link to directory %s", target)
		}
		// A hard link is the same inode: it shares the content and the
		// metadata of its target, whatever its own header says.
		link := *old
		link.Path = p
		if link.Kind == tree.Regular {
			st.Files++
		}
		st.HardLinks++
		return &link, nil
	case tar.TypeChar, tar.TypeBlock, tar.TypeFifo:
		n.Kind = map[byte]tree.Kind{tar.TypeChar: tree.CharDev, tar.TypeBlock: tree.BlockDev, tar.TypeFifo: tree.FIFO}[hdr.Typeflag]
		if hdr.Typeflag != tar.TypeFifo {
			n.Rdev = mkdev(uint64(hdr.Devmajor), uint64(hdr.Devminor))
		}
		st.Specials++
	default:
		return nil, fmt.Errorf("unsupported tar entry type %q", hdr.Typeflag)
	}
	return n, nil
}

// xattrs collects the extended attributes GNU tar and bsdtar store as
// SCHILY.xattr.* PAX records.
func xattrs(hdr *tar.Header) map[string][]byte {
	var m map[string][]byte
	for k, v := range hdr.PAXRecords {
		if name, ok := strings.CutPrefix(k, "SCHILY.xattr."); ok {
			if m == nil {
				m = map[string][]byte{}
			}
			m[name] = []byte(v)
		}
	}
	return m
}

// mkdev encodes a device number the way glibc's makedev does, which is the
// Linux dev_t tree.Node.Rdev holds.
func mkdev(major, minor uint64) uint64 {
	return (major&0xfff)<<8 | (major&^0xfff)<<32 | minor&0xff | (minor&^0xff)<<12
}

// readControlTar returns the fields of ./control inside control.tar.*.
func readControlTar(r io.Reader, member string) (map[string]string, error) {
	zr, _, done, err := decompress(r, member)
	if err != nil {
		return nil, err
	}
	defer done()
	tr := tar.NewReader(zr)
	for {
		hdr, err := tr.Next()
		if err == io.EOF {
			return nil, fmt.Errorf("%s has no control file", member)
		}
		if err != nil {
			return nil, fmt.Errorf("reading %s: %w", member, err)
		}
		if tree.Canonical(hdr.Name) != "/control" || hdr.Typeflag != tar.TypeReg {
			continue
		}
		if hdr.Size > maxControlSize {
			return nil, fmt.Errorf("%s: control file of %d bytes is too large", member, hdr.Size)
		}
		data, err := io.ReadAll(tr)
		if err != nil {
			return nil, fmt.Errorf("reading control in %s: %w", member, err)
		}
		fields, err := parseControl(string(data))
		if err != nil {
			return nil, fmt.Errorf("parsing control in %s: %w", member, err)
		}
		return fields, nil
	}
}

// parseControl parses the single deb822 paragraph of a control file.
// Continuation lines (a leading space or tab) are kept, joined with "\n",
// as Debian policy defines multi-line fields such as Description.
// pault.ag/go/debian/control would do this, but it pulls in a module
// (pault.ag/go/topsort) that go.mod does not carry.
func parseControl(text string) (map[string]string, error) {
	fields := map[string]string{}
	last := ""
	for i, line := range strings.Split(text, "\n") {
		switch {
		case strings.TrimSpace(line) == "":
			if len(fields) > 0 {
				return fields, nil // end of the paragraph
			}
		case strings.HasPrefix(line, "#"):
		case line[0] == ' ' || line[0] == '\t':
			if last == "" {
				return nil, fmt.Errorf("line %d: continuation line before any field", i+1)
			}
			fields[last] += "\n" + strings.TrimSpace(line)
		default:
			k, v, ok := strings.Cut(line, ":")
			if !ok || strings.TrimSpace(k) == "" {
				return nil, fmt.Errorf("line %d: %q is not a \"Field: value\" line", i+1, line)
			}
			last = strings.TrimSpace(k)
			fields[last] = strings.TrimSpace(v)
		}
	}
	if len(fields) == 0 {
		return nil, fmt.Errorf("empty control file")
	}
	return fields, nil
}
