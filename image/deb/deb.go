// Package deb unpacks Debian binary packages into the in-memory image tree.
//
// A .deb is an ar archive holding debian-binary, control.tar.* and
// data.tar.*. Extraction streams data.tar straight into tree nodes, keeping
// the numeric owners, modes (setuid, setgid and sticky included), symlinks,
// hard links, device nodes and xattrs the archive declares. Nothing is
// written to disk and no maintainer script runs: what those scripts would do
// is the job of explicit finalize steps, so a rootless build produces
// exactly what the packages say.
//
// Decoding a package does not touch the tree, so packages decode in
// parallel; ExtractAll then adds them to the tree in a fixed order, which is
// what makes conflicts and the result deterministic.
package deb

import (
	"fmt"
	"io"
	"strings"

	"github.com/drover-os/drover/image/tree"
)

// Options tune extraction.
type Options struct {
	// Skip, when set, is asked for every entry's canonical absolute path
	// (merged-/usr applied, e.g. /usr/share/doc/dash/copyright); entries it
	// returns true for are dropped while reading, so filtered docs, man
	// pages and locales never occupy memory. It must be safe for
	// concurrent use: ExtractAll calls it from several goroutines.
	Skip func(path string) bool
	// Unpacked, when set, keeps each package's data.tar decompressed so
	// that later extractions of the same .deb (a warm build) skip the
	// decompression, which dominates assembly (xz decodes at ~30 MB/s).
	Unpacked Unpacked
	// Aside, when set, is handed the content of the regular files it
	// wants, whether Skip drops them or not: the build reads each
	// package's Debian changelog this way, though the image leaves
	// /usr/share/doc out.
	Aside Aside

	tee io.Writer // receives the decompressed data.tar while it is read
}

// Aside collects files while packages are read. ExtractAll calls it from
// several goroutines, and may hand the same file twice (a kept data.tar
// that turns out damaged is read again from the .deb): Put replaces.
type Aside interface {
	// Want is asked for every regular file's canonical path.
	Want(path string) bool
	// Put receives a wanted file of package pkg; data may be the tree
	// node's own, so it must not be changed. Files larger than MaxAside
	// are not handed over.
	Put(pkg, path string, data []byte)
}

// MaxAside bounds a file handed to Options.Aside (a package's largest
// changelog, the kernel's, is 1.5 MiB compressed).
const MaxAside = 64 << 20

// Unpacked stores decompressed data.tar streams, keyed by the .deb's path
// (which, in drover's cache, names its sha256).
type Unpacked interface {
	// Get opens the kept data.tar of the .deb at debPath, if any.
	Get(debPath string) (io.ReadCloser, bool)
	// Put returns a writer for the data.tar of debPath and a function to
	// call once it is complete (ok) or abandoned.
	Put(debPath string) (io.Writer, func(ok bool))
}

// Stats describe what one package contributed.
type Stats struct {
	Package     string
	Control     map[string]string // fields of the package's control file
	Compression string            // of data.tar: "xz", "zst", "gz" or "none"
	Files       int               // regular files, hard links included
	HardLinks   int
	Dirs        int
	Symlinks    int
	Specials    int   // devices and fifos
	Skipped     int   // entries Options.Skip dropped
	Bytes       int64 // content of regular files, hard links counted once
}

// Extract reads a whole .deb from r and adds the contents of its data.tar
// to t, each node owned by pkg. It is safe to call concurrently for
// different trees.
func Extract(r io.Reader, pkg string, t *tree.Tree, opt Options) (*Stats, error) {
	nodes, st, err := decode(r, pkg, opt)
	if err != nil {
		return nil, err
	}
	if err := addNodes(t, pkg, nodes); err != nil {
		return nil, err
	}
	return st, nil
}

// Control returns the fields of the control file of the .deb read from r
// (Package, Version, Architecture, …). It stops reading after control.tar,
// so it does not pay for decompressing data.tar.
func Control(r io.Reader) (map[string]string, error) {
	ar, err := openDeb(r)
	if err != nil {
		return nil, fmt.Errorf("reading control of .deb: %w", err)
	}
	for {
		name, _, err := ar.Next()
		if err == io.EOF {
			return nil, fmt.Errorf("reading control of .deb: no control.tar member")
		}
		if err != nil {
			return nil, fmt.Errorf("reading control of .deb: %w", err)
		}
		if strings.HasPrefix(name, "control.tar") {
			fields, err := readControlTar(ar, name)
			if err != nil {
				return nil, fmt.Errorf("reading control of .deb: %w", err)
			}
			return fields, nil
		}
	}
}

// decode turns a .deb into nodes without touching any tree.
func decode(r io.Reader, pkg string, opt Options) ([]*tree.Node, *Stats, error) {
	ar, err := openDeb(r)
	if err != nil {
		return nil, nil, fmt.Errorf("extracting %s: %w", pkg, err)
	}
	st := &Stats{Package: pkg}
	for {
		name, _, err := ar.Next()
		if err == io.EOF {
			return nil, nil, fmt.Errorf("extracting %s: the .deb has no data.tar member", pkg)
		}
		if err != nil {
			return nil, nil, fmt.Errorf("extracting %s: %w", pkg, err)
		}
		switch {
		case strings.HasPrefix(name, "control.tar"):
			if st.Control, err = readControlTar(ar, name); err != nil {
				return nil, nil, fmt.Errorf("extracting %s: %w", pkg, err)
			}
		case strings.HasPrefix(name, "data.tar"):
			nodes, err := readDataTar(ar, name, pkg, opt, st)
			if err != nil {
				return nil, nil, err
			}
			// Members after data.tar are only ever dpkg's optional
			// "_"-prefixed extensions, which carry no files.
			return nodes, st, nil
		}
	}
}

// openDeb checks the ar magic and the debian-binary member that every .deb
// starts with.
func openDeb(r io.Reader) (*arReader, error) {
	ar, err := newArReader(r)
	if err != nil {
		return nil, err
	}
	name, size, err := ar.Next()
	if err != nil {
		return nil, noEOF(err)
	}
	if name != "debian-binary" || size > 64 {
		return nil, fmt.Errorf("first ar member is %q, want debian-binary: not a .deb", name)
	}
	v, err := io.ReadAll(ar)
	if err != nil {
		return nil, fmt.Errorf("reading debian-binary: %w", err)
	}
	if !strings.HasPrefix(string(v), "2.") {
		return nil, fmt.Errorf("unsupported .deb format version %q (want 2.x)", strings.TrimSpace(string(v)))
	}
	return ar, nil
}

func addNodes(t *tree.Tree, pkg string, nodes []*tree.Node) error {
	for _, n := range nodes {
		if err := t.Add(n); err != nil {
			return fmt.Errorf("extracting %s: %w", pkg, err)
		}
	}
	return nil
}
