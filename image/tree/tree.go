// Package tree is the in-memory root filesystem an image is assembled in:
// every file with its content, mode (setuid included), owner, link target
// and the package that shipped it. Nothing is staged on disk, so ownership
// and modes survive a rootless build exactly as the packages declare them.
//
// Paths are clean and absolute. The tree keeps Debian's merged-/usr layout:
// a path under /bin, /sbin, /lib, /lib32, /lib64 or /libx32 is stored under
// /usr, and those top-level names are symlinks into /usr.
package tree

import (
	"bytes"
	"fmt"
	"path"
	"sort"
	"strings"
)

// Kind is the type of a node.
type Kind uint8

// Node kinds.
const (
	Regular Kind = iota
	Dir
	Symlink
	CharDev
	BlockDev
	FIFO
)

func (k Kind) String() string {
	return [...]string{"file", "directory", "symlink", "char device", "block device", "fifo"}[k]
}

// Node is one entry of the tree.
type Node struct {
	Path   string
	Kind   Kind
	Mode   uint32 // permission bits including setuid, setgid and sticky (07777)
	UID    uint32
	GID    uint32
	Data   []byte // regular files
	Target string // symlinks
	Rdev   uint64 // devices: Linux dev_t
	Xattrs map[string][]byte
	// Owner names what put the node here: a package name, "recipe", or a
	// finalize step; used in conflict errors and the manifest.
	Owner string
}

// usrAliases are the top-level directories that merged-/usr turns into
// symlinks to their /usr counterparts.
var usrAliases = []string{"bin", "sbin", "lib", "lib32", "lib64", "libx32"}

// Canonical cleans p and maps merged-/usr aliases into /usr.
func Canonical(p string) string {
	p = path.Clean("/" + strings.TrimPrefix(p, "./"))
	for _, a := range usrAliases {
		if p == "/"+a {
			return p // the alias itself (a symlink)
		}
		if strings.HasPrefix(p, "/"+a+"/") {
			return "/usr" + p
		}
	}
	return p
}

// Tree is a whole filesystem.
type Tree struct {
	nodes map[string]*Node
	// Prefer says, for a path two packages ship with different content,
	// which package's copy wins (from the recipe).
	Prefer map[string]string
}

// skeletonOwner owns the layout New starts every tree with (and, in the
// manifest, what finalize writes).
const skeletonOwner = "drover"

// skeletonAliases are the merged-/usr links New makes.
var skeletonAliases = []string{"bin", "sbin", "lib", "lib64"}

// New returns a tree with the root directory and the merged-/usr symlinks.
func New() *Tree {
	t := &Tree{nodes: map[string]*Node{}}
	t.nodes["/"] = &Node{Path: "/", Kind: Dir, Mode: 0o755, Owner: skeletonOwner}
	t.nodes["/usr"] = &Node{Path: "/usr", Kind: Dir, Mode: 0o755, Owner: skeletonOwner}
	for _, a := range skeletonAliases {
		t.nodes["/"+a] = &Node{Path: "/" + a, Kind: Symlink, Mode: 0o777, Target: "usr/" + a, Owner: skeletonOwner}
		t.nodes["/usr/"+a] = &Node{Path: "/usr/" + a, Kind: Dir, Mode: 0o755, Owner: skeletonOwner}
	}
	return t
}

// skeleton says whether p is one of the paths New makes.
func skeleton(p string) bool {
	if p == "/" || p == "/usr" {
		return true
	}
	for _, a := range skeletonAliases {
		if p == "/"+a || p == "/usr/"+a {
			return true
		}
	}
	return false
}

// Get returns the node at p, or nil.
func (t *Tree) Get(p string) *Node { return t.nodes[Canonical(p)] }

// Len is the number of nodes.
func (t *Tree) Len() int { return len(t.nodes) }

// Add puts n into the tree, creating missing parent directories (0755,
// root). Adding a directory over a directory keeps the first one's metadata
// unless the new one is owned by a package and the old one was implied. A
// path shipped twice with different content is an error unless Prefer
// names the winner.
func (t *Tree) Add(n *Node) error {
	n.Path = Canonical(n.Path)
	if n.Kind == Symlink && n.Mode == 0 {
		n.Mode = 0o777
	}
	if alias := strings.TrimPrefix(n.Path, "/"); n.Kind != Symlink && contains(usrAliases, alias) {
		if n.Kind == Dir {
			return nil // merged-/usr: the alias is a symlink into /usr
		}
		return fmt.Errorf("%s %s from %s: %s is the merged-/usr layout's symlink, which every image has and no package can replace",
			n.Kind, n.Path, n.Owner, n.Path)
	}
	if err := t.mkdirAll(path.Dir(n.Path), n.Owner); err != nil {
		return err
	}
	old, ok := t.nodes[n.Path]
	if !ok {
		t.nodes[n.Path] = n
		return nil
	}
	if old.Kind == Dir && n.Kind == Dir {
		if old.Owner == "implied" {
			t.nodes[n.Path] = n
		}
		return nil
	}
	if same(old, n) {
		return nil
	}
	if old.Owner == skeletonOwner && skeleton(n.Path) {
		// No prefer: can pick a package over the layout every path
		// under /usr, and every alias, depends on.
		return fmt.Errorf("%s %s from %s: %s is the merged-/usr layout's %s, which every image has and no package can replace",
			n.Kind, n.Path, n.Owner, n.Path, old.Kind)
	}
	switch t.Prefer[n.Path] {
	case n.Owner:
		t.nodes[n.Path] = n
		return nil
	case old.Owner:
		return nil
	}
	return fmt.Errorf("%s is shipped by both %s and %s with different content: pick one with `prefer: {%s: PACKAGE}` in the recipe",
		n.Path, old.Owner, n.Owner, n.Path)
}

// Set puts n into the tree unconditionally (finalize steps overwrite).
func (t *Tree) Set(n *Node) error {
	n.Path = Canonical(n.Path)
	if err := t.mkdirAll(path.Dir(n.Path), n.Owner); err != nil {
		return err
	}
	t.nodes[n.Path] = n
	return nil
}

func (t *Tree) mkdirAll(dir, owner string) error {
	if dir == "/" {
		return nil
	}
	dir = Canonical(dir)
	if n, ok := t.nodes[dir]; ok {
		if n.Kind != Dir {
			return fmt.Errorf("%s from %s: parent %s is a %s, not a directory", dir, owner, dir, n.Kind)
		}
		return nil
	}
	if err := t.mkdirAll(path.Dir(dir), owner); err != nil {
		return err
	}
	t.nodes[dir] = &Node{Path: dir, Kind: Dir, Mode: 0o755, Owner: "implied"}
	return nil
}

func same(a, b *Node) bool {
	return a.Kind == b.Kind && a.Mode == b.Mode && a.UID == b.UID && a.GID == b.GID &&
		a.Target == b.Target && a.Rdev == b.Rdev && bytes.Equal(a.Data, b.Data)
}

// Remove deletes p and, for a directory, everything below it. It reports
// how many nodes went.
func (t *Tree) Remove(p string) int {
	p = Canonical(p)
	n := 0
	for k := range t.nodes {
		if k == p || strings.HasPrefix(k, p+"/") {
			delete(t.nodes, k)
			n++
		}
	}
	return n
}

// Paths returns every path, sorted, so that whatever is written from the
// tree comes out in the same order on every build.
func (t *Tree) Paths() []string {
	out := make([]string, 0, len(t.nodes))
	for p := range t.nodes {
		out = append(out, p)
	}
	sort.Strings(out)
	return out
}

// Walk calls fn for every node in sorted path order.
func (t *Tree) Walk(fn func(*Node) error) error {
	for _, p := range t.Paths() {
		if err := fn(t.nodes[p]); err != nil {
			return err
		}
	}
	return nil
}

// Glob returns the sorted paths matching a path.Match pattern.
func (t *Tree) Glob(pattern string) []string {
	var out []string
	for _, p := range t.Paths() {
		if ok, _ := path.Match(pattern, p); ok {
			out = append(out, p)
		}
	}
	return out
}

// Size is the total size of regular files' contents.
func (t *Tree) Size() int64 {
	var n int64
	for _, nd := range t.nodes {
		n += int64(len(nd.Data))
	}
	return n
}

func contains(list []string, s string) bool {
	for _, x := range list {
		if x == s {
			return true
		}
	}
	return false
}
