// Package diff explains what changed between two drover images by
// comparing their manifests (`drover diff`): packages, Go and URL
// components, kernel, command line, root hash, enabled units, initrd
// modules, boot files, partitions and every file of the root filesystem;
// and, from the changelogs the manifests record, what each changed
// package's new version fixes.
//
// Compare is pure and deterministic: every list is sorted, so the same two
// manifests always give the same Diff and the same rendered bytes, which a
// merge request can show and a pipeline can compare. Files owned by a
// component that itself changed (a package whose version moved) are counted
// under that component instead of listed one by one: the component line is
// the real change, its files follow from it. Every other changed file is
// listed.
package diff

import (
	"sort"
	"strings"

	"github.com/drover-os/drover/image/build"
)

// Diff is the difference between two manifests. Empty lists (never nil)
// and nil pointers mean "no change"; JSON renders them as [] and null.
type Diff struct {
	Old Ident `json:"old"`
	New Ident `json:"new"`
	// Inputs are changes of the build's inputs that are not themselves
	// image content: recipe and lock digests, builder version, Debian
	// suite snapshots.
	Inputs []Change `json:"inputs"`
	// Arch is set when the images are of different architectures (an
	// amd64 and an arm64 build of the same node): then most packages
	// differ only by it, and Text and Markdown fold those into one line.
	Arch     *Change         `json:"arch"`
	Packages []PackageChange `json:"packages"`
	Go       []GoChange      `json:"go"`
	URLs     []URLChange     `json:"urls"`
	// Images are the cached workload images added, removed or changed
	// (another digest under the same name); ImageFiles count the root's
	// image cache files that changed with them; CacheDisk is the cache
	// disk image's file and sha256.
	Images     []ImageChange `json:"images"`
	ImageFiles FileCounts    `json:"imageFiles"`
	CacheDisk  *Change       `json:"cacheDisk"`
	// Fixes say, per changed Debian source package and Go module, what
	// the new version fixes (or a downgrade loses), from the changelogs
	// and release notes the manifests record.
	Fixes         []Fix      `json:"fixes"`
	Kernel        *Change    `json:"kernel"`
	Cmdline       *Change    `json:"cmdline"` // without drover.roothash=, see RootHash
	RootHash      *Change    `json:"rootHash"`
	Units         ListChange `json:"units"`
	InitrdModules ListChange `json:"initrdModules"`
	// What the recipe leaves out (excluded packages as "name version",
	// remove globs) and the setuid/setgid files ("path mode uid:gid").
	Excluded   ListChange        `json:"excluded"`
	Removed    ListChange        `json:"removed"`
	Setuid     ListChange        `json:"setuid"`
	ESP        []ESPChange       `json:"esp"`
	Files      []FileChange      `json:"files"` // those not counted under a changed component
	Partitions []PartitionChange `json:"partitions"`
	RootFS     *SizeChange       `json:"rootfsSize"`
	Disk       *SizeChange       `json:"diskSize"`
}

// Ident names one side of the comparison.
type Ident struct {
	Name     string `json:"name"`
	Version  string `json:"version"`
	BuildID  string `json:"buildID"`
	RootHash string `json:"rootHash"`
}

// Change is a value that differs; What names it where the context does not.
type Change struct {
	What string `json:"what,omitempty"`
	Old  string `json:"old"`
	New  string `json:"new"`
}

// SizeChange is a size in bytes that differs.
type SizeChange struct {
	Old int64 `json:"old"`
	New int64 `json:"new"`
}

// FileCounts counts the root-filesystem paths of a changed component that
// were added, removed or changed.
type FileCounts struct {
	Added   int `json:"added"`
	Removed int `json:"removed"`
	Changed int `json:"changed"`
}

func (c FileCounts) total() int { return c.Added + c.Removed + c.Changed }

// PackageChange is a Debian package added (Old empty), removed (New empty)
// or changed. Versions carry the architecture when it changed too.
type PackageChange struct {
	Name string `json:"name"`
	// SameVersion: the same version built for another architecture, the
	// architecture being the only difference.
	SameVersion bool   `json:"sameVersion,omitempty"`
	Old         string `json:"old"`
	New         string `json:"new"`
	Note        string `json:"note,omitempty"` // e.g. same version but a different .deb
	// Security: the new version comes from a -security suite.
	Security bool       `json:"security,omitempty"`
	Files    FileCounts `json:"files"`
}

// GoSide is one side of a Go component change.
type GoSide struct {
	Module    string `json:"module"`
	Version   string `json:"version"`
	SHA256    string `json:"sha256"`
	GoVersion string `json:"goVersion"`
}

// GoChange is a Go component added (Old nil), removed (New nil) or changed.
type GoChange struct {
	Name        string     `json:"name"`
	Old         *GoSide    `json:"old"`
	New         *GoSide    `json:"new"`
	DepsAdded   []string   `json:"depsAdded"`
	DepsRemoved []string   `json:"depsRemoved"`
	Files       FileCounts `json:"files"`
}

// URLSide is one side of a URL component change.
type URLSide struct {
	URL    string `json:"url"`
	SHA256 string `json:"sha256"`
	Size   int64  `json:"size"`
}

// URLChange is a URL component added (Old nil), removed (New nil) or changed.
type URLChange struct {
	Name  string     `json:"name"`
	Old   *URLSide   `json:"old"`
	New   *URLSide   `json:"new"`
	Files FileCounts `json:"files"`
}

// ListChange is a set of strings with members added and removed.
// Reordered is set when the members are the same but their order is not
// (it matters for initrd modules, which load in order).
type ListChange struct {
	Added     []string `json:"added"`
	Removed   []string `json:"removed"`
	Reordered bool     `json:"reordered"`
}

func (l ListChange) empty() bool { return len(l.Added) == 0 && len(l.Removed) == 0 && !l.Reordered }

// Kinds of FileChange and ESPChange.
const (
	Added   = "added"
	Removed = "removed"
	Changed = "changed"
)

// FileChange is one path of the root filesystem that was added, removed or
// changed. Details say what changed ("content", "mode 0644 → 0755", …).
type FileChange struct {
	Path    string           `json:"path"`
	Change  string           `json:"change"`
	From    string           `json:"from"` // the owning package or origin
	Details []string         `json:"details"`
	Old     *build.FileEntry `json:"old"`
	New     *build.FileEntry `json:"new"`
}

// ESPChange is one file of the EFI System Partition that differs. Details
// of a changed EFI binary name its signature change and, for the UKI, the
// PE sections whose content differs.
type ESPChange struct {
	Path    string   `json:"path"`
	Change  string   `json:"change"`
	Old     string   `json:"oldSHA256"`
	New     string   `json:"newSHA256"`
	Details []string `json:"details,omitempty"`
}

// PartitionChange is a partition whose place or content differs.
type PartitionChange struct {
	Name    string   `json:"name"`
	Details []string `json:"details"`
}

// Compare returns what changed from old to new.
func Compare(old, new *build.Manifest) *Diff {
	d := &Diff{Old: ident(old), New: ident(new)}
	d.Inputs = compareInputs(old, new)
	d.Arch = changed("", archOf(old), archOf(new))
	d.Packages = comparePackages(old.Packages, new.Packages)
	d.Go = compareGo(old.Go, new.Go)
	d.URLs = compareURLs(old.URLs, new.URLs)
	d.Images = compareImages(old, new)
	d.CacheDisk = changed("", cacheDisk(old), cacheDisk(new))
	d.Fixes = compareFixes(old, new)
	d.Kernel = changed("", old.Kernel, new.Kernel)
	d.Cmdline = changed("", withoutRootHash(old.Cmdline), withoutRootHash(new.Cmdline))
	d.RootHash = changed("", old.RootHash, new.RootHash)
	d.Units = compareLists(old.Units, new.Units)
	d.InitrdModules = compareLists(old.InitrdModules, new.InitrdModules)
	d.Excluded = compareSets(excludedList(old), excludedList(new))
	d.Removed = compareSets(removedList(old), removedList(new))
	d.Setuid = compareSets(setuidList(old), setuidList(new))
	d.ESP = compareESP(old.ESP, new.ESP)
	d.Partitions = comparePartitions(old.Partitions, new.Partitions, len(d.ESP) > 0)
	if old.RootFS.Size != new.RootFS.Size {
		d.RootFS = &SizeChange{old.RootFS.Size, new.RootFS.Size}
	}
	if old.DiskSize != new.DiskSize {
		d.Disk = &SizeChange{old.DiskSize, new.DiskSize}
	}
	d.Files = d.groupFiles(compareFiles(old.Files, new.Files))
	return d
}

// Equal reports whether the two manifests describe the same image.
func (d *Diff) Equal() bool {
	return len(d.Inputs) == 0 && d.Arch == nil && len(d.Packages) == 0 && len(d.Go) == 0 && len(d.URLs) == 0 &&
		len(d.Images) == 0 && d.CacheDisk == nil && d.Kernel == nil && d.Cmdline == nil && d.RootHash == nil && d.Units.empty() && d.InitrdModules.empty() &&
		d.Excluded.empty() && d.Removed.empty() && d.Setuid.empty() &&
		len(d.ESP) == 0 && len(d.Files) == 0 && len(d.Partitions) == 0 && d.RootFS == nil && d.Disk == nil
}

// archOf is a manifest's architecture; manifests written before drover
// built arm64 have none and are amd64.
func archOf(m *build.Manifest) string {
	if m.Arch == "" {
		return "amd64"
	}
	return m.Arch
}

func ident(m *build.Manifest) Ident {
	return Ident{Name: m.Name, Version: m.Version, BuildID: m.BuildID, RootHash: m.RootHash}
}

func changed(what, old, new string) *Change {
	if old == new {
		return nil
	}
	return &Change{What: what, Old: old, New: new}
}

// withoutRootHash drops the drover.roothash= argument, which changes with
// every root filesystem change and is reported as the root hash instead.
func withoutRootHash(cmdline string) string {
	var keep []string
	for _, f := range strings.Fields(cmdline) {
		if !strings.HasPrefix(f, "drover.roothash=") {
			keep = append(keep, f)
		}
	}
	return strings.Join(keep, " ")
}

// fieldChanges renders "name old → new" for each differing field.
func fieldChanges(fields ...[3]string) []string {
	var out []string
	for _, f := range fields {
		if f[1] != f[2] {
			out = append(out, f[0]+" "+f[1]+" → "+f[2])
		}
	}
	return out
}

func byName[T any](items []T, key func(T) string) map[string]T {
	m := make(map[string]T, len(items))
	for _, it := range items {
		m[key(it)] = it
	}
	return m
}

func unionKeys[A, B any](a map[string]A, b map[string]B) []string {
	seen := make(map[string]bool, len(a)+len(b))
	for k := range a {
		seen[k] = true
	}
	for k := range b {
		seen[k] = true
	}
	keys := make([]string, 0, len(seen))
	for k := range seen {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	return keys
}
