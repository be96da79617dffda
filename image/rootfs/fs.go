package rootfs

import (
	"bytes"
	"io"
	"io/fs"
	"path"
	"sort"
	"strings"
	"time"

	"github.com/drover-os/drover/image/tree"
)

// treeFS presents the directories, regular files and symlinks of a tree as
// an fs.FS, which is how go-erofs takes file content without copying it to
// a spool file first. Devices and fifos are left out: the writer only gives
// them a device number through Mknod. Ownership, times and link counts are
// set through the writer afterwards, so nothing here depends on the
// platform's stat type.
type treeFS struct {
	nodes    map[string]*tree.Node    // by fs.FS name: "." or "usr/bin/sh"
	children map[string][]fs.DirEntry // by directory name, sorted
	mtime    time.Time
}

// fsName maps a tree path to an fs.FS name.
func fsName(p string) string {
	if p == "/" {
		return "."
	}
	return strings.TrimPrefix(p, "/")
}

// inFS says whether a node is part of the fs.FS view.
func inFS(n *tree.Node) bool {
	return n.Kind == tree.Regular || n.Kind == tree.Dir || n.Kind == tree.Symlink
}

func newTreeFS(nodes []*tree.Node, mtime time.Time) *treeFS {
	f := &treeFS{
		nodes:    make(map[string]*tree.Node, len(nodes)),
		children: map[string][]fs.DirEntry{},
		mtime:    mtime,
	}
	for _, n := range nodes {
		if !inFS(n) {
			continue
		}
		name := fsName(n.Path)
		f.nodes[name] = n
		if name != "." {
			dir := fsName(path.Dir(n.Path))
			f.children[dir] = append(f.children[dir], fs.FileInfoToDirEntry(f.info(n)))
		}
	}
	for _, c := range f.children {
		sort.Slice(c, func(i, j int) bool { return c[i].Name() < c[j].Name() })
	}
	return f
}

func (f *treeFS) lookup(op, name string) (*tree.Node, error) {
	if !fs.ValidPath(name) {
		return nil, &fs.PathError{Op: op, Path: name, Err: fs.ErrInvalid}
	}
	n, ok := f.nodes[name]
	if !ok {
		return nil, &fs.PathError{Op: op, Path: name, Err: fs.ErrNotExist}
	}
	return n, nil
}

// Open implements fs.FS.
func (f *treeFS) Open(name string) (fs.File, error) {
	n, err := f.lookup("open", name)
	if err != nil {
		return nil, err
	}
	return &treeFile{info: f.info(n), Reader: bytes.NewReader(n.Data), entries: f.children[name]}, nil
}

// Stat implements fs.StatFS.
func (f *treeFS) Stat(name string) (fs.FileInfo, error) {
	n, err := f.lookup("stat", name)
	if err != nil {
		return nil, err
	}
	return f.info(n), nil
}

// ReadDir implements fs.ReadDirFS.
func (f *treeFS) ReadDir(name string) ([]fs.DirEntry, error) {
	n, err := f.lookup("readdir", name)
	if err != nil {
		return nil, err
	}
	if n.Kind != tree.Dir {
		return nil, &fs.PathError{Op: "readdir", Path: name, Err: fs.ErrInvalid}
	}
	return append([]fs.DirEntry(nil), f.children[name]...), nil
}

// ReadLink is what go-erofs asks for a symlink's target.
func (f *treeFS) ReadLink(name string) (string, error) {
	n, err := f.lookup("readlink", name)
	if err != nil {
		return "", err
	}
	if n.Kind != tree.Symlink {
		return "", &fs.PathError{Op: "readlink", Path: name, Err: fs.ErrInvalid}
	}
	return n.Target, nil
}

func (f *treeFS) info(n *tree.Node) *nodeInfo { return &nodeInfo{n: n, mtime: f.mtime} }

// nodeInfo is the fs.FileInfo of a node.
type nodeInfo struct {
	n     *tree.Node
	mtime time.Time
}

func (i *nodeInfo) Name() string       { return path.Base(i.n.Path) }
func (i *nodeInfo) ModTime() time.Time { return i.mtime }
func (i *nodeInfo) IsDir() bool        { return i.n.Kind == tree.Dir }
func (i *nodeInfo) Sys() any           { return nil }
func (i *nodeInfo) Mode() fs.FileMode  { return fileMode(i.n) }

func (i *nodeInfo) Size() int64 {
	switch i.n.Kind {
	case tree.Regular:
		return int64(len(i.n.Data))
	case tree.Symlink:
		return int64(len(i.n.Target))
	}
	return 0
}

// fileMode converts a node's type and Unix permission bits (07777) to an
// fs.FileMode, which keeps setuid, setgid and sticky as separate flags.
func fileMode(n *tree.Node) fs.FileMode {
	m := fs.FileMode(n.Mode & 0o777)
	if n.Mode&0o4000 != 0 {
		m |= fs.ModeSetuid
	}
	if n.Mode&0o2000 != 0 {
		m |= fs.ModeSetgid
	}
	if n.Mode&0o1000 != 0 {
		m |= fs.ModeSticky
	}
	switch n.Kind {
	case tree.Dir:
		m |= fs.ModeDir
	case tree.Symlink:
		m |= fs.ModeSymlink
	case tree.CharDev:
		m |= fs.ModeDevice | fs.ModeCharDevice
	case tree.BlockDev:
		m |= fs.ModeDevice
	case tree.FIFO:
		m |= fs.ModeNamedPipe
	}
	return m
}

// treeFile is an open node: content for a file, entries for a directory.
type treeFile struct {
	info *nodeInfo
	*bytes.Reader
	entries []fs.DirEntry
	off     int
}

func (t *treeFile) Stat() (fs.FileInfo, error) { return t.info, nil }
func (t *treeFile) Close() error               { return nil }

// ReadDir implements fs.ReadDirFile.
func (t *treeFile) ReadDir(n int) ([]fs.DirEntry, error) {
	rest := t.entries[t.off:]
	if n <= 0 {
		t.off = len(t.entries)
		return rest, nil
	}
	if len(rest) == 0 {
		return nil, io.EOF
	}
	rest = rest[:min(n, len(rest))]
	t.off += len(rest)
	return rest, nil
}
