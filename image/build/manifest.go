package build

import (
	"bytes"
	"crypto/sha256"
	"debug/buildinfo"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"strings"
	"time"

	"github.com/drover-os/drover/image/gomod"
	"github.com/drover-os/drover/image/lock"
	"github.com/drover-os/drover/image/tree"
	"github.com/drover-os/drover/image/uki"
)

// Manifest describes an image completely enough to review a change
// (`drover diff`) and to re-check the image (`drover verify`).
type Manifest struct {
	Schema  string `json:"schema"`
	Name    string `json:"name"`
	Arch    string `json:"arch"` // Debian architecture: amd64, arm64
	Version string `json:"version"`
	BuildID string `json:"buildID"`
	Builder string `json:"builder"`
	// BuilderSource is what is known of the source the builder was
	// compiled from: clean, dirty or unknown.
	BuilderSource gomod.SourceState `json:"builderSource"`
	RecipeSHA256  string            `json:"recipeSHA256"`
	LockSHA256    string            `json:"lockSHA256"`
	// RecipeTree, Inputs and Toolchain are what the provenance names as
	// the source, the files read and the Go toolchain; manifests written
	// before drover recorded them have none.
	RecipeTree *RecipeTree      `json:"recipeTree,omitempty"`
	Inputs     []InputFile      `json:"inputs,omitempty"`
	Toolchain  *gomod.Toolchain `json:"toolchain,omitempty"`
	Epoch      int64            `json:"epoch"`
	Suites     []lock.Suite     `json:"suites"`
	Distro     string           `json:"distro,omitempty"` // the image's os-release ID-VERSION_ID ("debian-13"): its packages' purl distro
	Kernel     string           `json:"kernel"`
	Cmdline    string           `json:"cmdline"`
	RootHash   string           `json:"rootHash"`
	Packages   []Package        `json:"packages"`
	// Excluded and Removed are what the recipe leaves out (exclude:,
	// remove:); Setuid lists every setuid/setgid file of the root.
	Excluded []ExcludedPackage `json:"excluded,omitempty"`
	Removed  []RemovedPaths    `json:"removed,omitempty"`
	Setuid   []SetuidFile      `json:"setuid"`
	Go       []GoComponent     `json:"go"`
	URLs     []lock.URL        `json:"urls"`
	Own      []OwnFile         `json:"drover"`
	Sandbox  *SandboxImage     `json:"sandbox,omitempty"`
	// Images are the recipe's cached workload images (images.go); nil
	// when it caches none.
	CachedImages *CachedImages `json:"cachedImages,omitempty"`
	// CNI is what ships of the CNI plugins the packages install; nil when
	// no package installs any.
	CNI           *CNIPlugins `json:"cni,omitempty"`
	Units         []string    `json:"enabledUnits"`
	InitrdModules []string    `json:"initrdModules"`
	RootFS        RootFSInfo  `json:"rootfs"`
	ESP           []ESPFile   `json:"esp"`
	Partitions    []Partition `json:"partitions"`
	DiskSize      int64       `json:"diskSize"`
	Images        []ImageFile `json:"images"`
	Files         []FileEntry `json:"files"`
	// Changelogs is what `drover diff` says a new version fixes from;
	// manifests written before drover recorded it have none (nil).
	Changelogs *Changelogs `json:"changelogs,omitempty"`
}

// Changelogs holds the recent part of each Debian source package's
// changelog and the security IDs the Go components' release notes name.
// Entries are bounded to keep the manifest small: those dated before Since
// are left out, except that each source keeps its newest MinEntries, and an
// entry's text is cut after MaxText bytes (its CVE IDs are from the whole
// entry).
type Changelogs struct {
	Since      time.Time         `json:"since"`
	MinEntries int               `json:"minEntries"`
	MaxText    int               `json:"maxText"`
	Debian     []SourceChangelog `json:"debian"`
	Go         []ReleaseNotes    `json:"go"`
}

// SourceChangelog is the changelog of one source package, as one of its
// binary packages ships it (/usr/share/doc/<dir>/changelog.Debian.gz, or
// changelog.gz for a native package), with the binNMU entries of
// changelog.Debian.<arch>.gz merged in; newest first.
type SourceChangelog struct {
	Source  string           `json:"source"`
	Package string           `json:"package,omitempty"` // the binary package read
	File    string           `json:"file,omitempty"`
	Entries []ChangelogEntry `json:"entries"`
	// More: the changelog goes on beyond the entries recorded (older
	// entries left out, or the rest could not be read).
	More    bool   `json:"more,omitempty"`
	Problem string `json:"problem,omitempty"` // why nothing could be read
}

// ChangelogEntry is one upload in a Debian changelog.
type ChangelogEntry struct {
	Version      string    `json:"version"`
	Date         time.Time `json:"date"`
	Distribution string    `json:"distribution,omitempty"`
	Urgency      string    `json:"urgency,omitempty"`
	CVEs         []string  `json:"cves,omitempty"` // sorted, once each
	Text         string    `json:"text"`
	CutLines     int       `json:"cutLines,omitempty"` // lines of the text left out
}

// ReleaseNotes are the security IDs the release notes a Go module carries
// name, per release (Kubernetes: CHANGELOG/CHANGELOG-<minor>.md of the
// module; containerd: releases/<version>.toml).
type ReleaseNotes struct {
	Module   string    `json:"module"`
	Version  string    `json:"version"`
	File     string    `json:"file,omitempty"`
	Releases []Release `json:"releases"`
	Problem  string    `json:"problem,omitempty"` // e.g. no release notes in the module
}

// Release is one release's section of the notes.
type Release struct {
	Version string   `json:"version"`
	CVEs    []string `json:"cves,omitempty"`
	GHSAs   []string `json:"ghsas,omitempty"`
}

// Package is one Debian package in the image. Source, Depends and Licenses
// come from the .deb's control file and its copyright file, for the SBOM.
type Package struct {
	Name    string `json:"name"`
	Version string `json:"version"`
	Arch    string `json:"arch"`
	SHA256  string `json:"sha256"`
	Path    string `json:"path"`
	// Suite is the Debian suite the lock took the package from (trixie,
	// trixie-updates, trixie-security): a security update is one from a
	// -security suite.
	Suite         string   `json:"suite,omitempty"`
	Source        string   `json:"source,omitempty"`
	SourceVersion string   `json:"sourceVersion,omitempty"`
	Depends       []string `json:"depends,omitempty"`  // packages of the image its Depends and Pre-Depends name
	Licenses      []string `json:"licenses,omitempty"` // DEP-5 license names its copyright file states
}

// GoComponent is one Go binary with its build info.
type GoComponent struct {
	Name      string   `json:"name"`
	Module    string   `json:"module"`
	Version   string   `json:"version"`
	Package   string   `json:"package"`
	Install   string   `json:"install"`
	SHA256    string   `json:"sha256"`
	GoVersion string   `json:"goVersion"`
	Deps      []string `json:"deps"`
}

// OwnFile is one of drover's own files in the image. For a Go binary
// (drover-agent, drover-init) it carries the build info the binary embeds:
// its main module, the toolchain and every linked module with its go.sum hash.
type OwnFile struct {
	Path      string   `json:"path"`
	SHA256    string   `json:"sha256"`
	Module    string   `json:"module,omitempty"`
	GoVersion string   `json:"goVersion,omitempty"`
	Deps      []string `json:"deps,omitempty"`
	// In is "initrd" for a binary the initrd carries and the root does
	// not (drover-init); empty for a file of the root.
	In string `json:"in,omitempty"`
	OwnSource
}

// SandboxImage is the pod sandbox image the image ships (sandbox.go): its
// name, its index digest (what the kubelet reports in the Node's images),
// the manifest digest of each platform, and the archive in the root.
type SandboxImage struct {
	Name      string            `json:"name"`
	Digest    string            `json:"digest"`
	Platforms map[string]string `json:"platforms"` // linux/<arch> → manifest digest
	Path      string            `json:"path"`
	SHA256    string            `json:"sha256"`
	Pause     []OwnFile         `json:"pause"` // cmd/drover-pause per architecture
}

// OwnSource says where one of drover's binaries came from: built from the
// checkout (its module, commit and source state), or an override given with
// --agent/--init (its path on the build host).
type OwnSource struct {
	Built  string        `json:"built,omitempty"` // "source" or "override"
	Source *gomod.Source `json:"source,omitempty"`
	From   string        `json:"from,omitempty"`
}

// version is what the SBOMs call the binary: the commit it was compiled
// from (+dirty) when known, else the builder's version.
func (o OwnFile) version(builder string) string {
	if o.Source != nil && o.Source.Commit != "" {
		v := o.Source.Commit
		if o.Source.Dirty() {
			v += "+dirty"
		}
		return v
	}
	return strings.TrimPrefix(builder, "drover ")
}

// RootFSInfo summarises the erofs root. Compression is the recipe's
// image.rootfs.compression; manifests written before the option have none
// (""), which means uncompressed. CompressedFiles of Files are stored
// compressed: CompressedBytes of content in CompressedDiskBytes.
type RootFSInfo struct {
	Size                int64  `json:"size"`
	Files               int    `json:"files"`
	Dirs                int    `json:"dirs"`
	Bytes               int64  `json:"dataBytes"`
	Compression         string `json:"compression,omitempty"`
	CompressedFiles     int    `json:"compressedFiles,omitempty"`
	CompressedBytes     int64  `json:"compressedDataBytes,omitempty"`
	CompressedDiskBytes int64  `json:"compressedDiskBytes,omitempty"`
}

// ESPFile is one file on the ESP. The UKI lists its PE sections with
// their digests; signed EFI binaries name their signing certificate.
type ESPFile struct {
	Path     string        `json:"path"`
	Size     int           `json:"size"`
	SHA256   string        `json:"sha256"`
	Sections []uki.Section `json:"sections,omitempty"`
	SignedBy string        `json:"signedBy,omitempty"`
}

// Partition is one GPT entry with the digest of its content.
type Partition struct {
	Index  int    `json:"index"`
	Name   string `json:"name"`
	Type   string `json:"type"`
	UUID   string `json:"uuid"`
	Offset int64  `json:"offset"`
	Size   int64  `json:"size"`
	SHA256 string `json:"sha256"`
}

// ImageFile is one output file.
type ImageFile struct {
	Format string `json:"format"`
	File   string `json:"file"`
	Size   int64  `json:"size"`
	SHA256 string `json:"sha256"`
}

// FileEntry is one path in the root filesystem.
type FileEntry struct {
	Path   string `json:"path"`
	Kind   string `json:"kind"`
	Mode   string `json:"mode"`
	Owner  string `json:"owner"` // uid:gid
	SHA256 string `json:"sha256,omitempty"`
	Target string `json:"target,omitempty"`
	From   string `json:"from"` // package or origin
}

func sha(b []byte) string {
	s := sha256.Sum256(b)
	return hex.EncodeToString(s[:])
}

// LockSHA256 is the digest a build records for its lock (the manifest's
// lockSHA256, the provenance's lock): the sha256 of the lock's canonical
// form, without the comment header drover lock writes, so a lock whose
// comments changed is the same input.
func LockSHA256(l *lock.Lock) string { return sha(l.Format("")) }

func newManifest(p *Plan, version string) *Manifest {
	m := &Manifest{Schema: "drover.dev/manifest/v1", Name: p.Recipe.Name, Arch: p.Recipe.Arch, Builder: "drover " + version,
		RecipeSHA256: p.Recipe.Digest(), LockSHA256: LockSHA256(p.Lock), Epoch: p.Lock.Epoch,
		Suites: p.Lock.Suites, URLs: p.Lock.URLs, Version: time.Unix(p.Lock.Epoch, 0).UTC().Format("20060102.150405")}
	left := map[string]bool{}
	for _, e := range p.Recipe.Exclude {
		left[e.Package] = true
	}
	for _, d := range p.Lock.Debs {
		if left[d.Name] {
			continue
		}
		m.Packages = append(m.Packages, Package{Name: d.Name, Version: d.Version, Arch: d.Arch, SHA256: d.SHA256, Path: d.Path, Suite: d.Suite})
	}
	return m
}

func (m *Manifest) addGo(lg lock.Go, bin *gomod.Binary, install string) {
	m.Go = append(m.Go, GoComponent{Name: lg.Name, Module: lg.Module, Version: lg.Version, Package: lg.Package,
		Install: install, SHA256: bin.SHA256, GoVersion: bin.GoVersion, Deps: bin.Deps})
}

func (m *Manifest) addOwn(path string, data []byte, how OwnSource) {
	o := OwnFile{Path: path, SHA256: sha(data), OwnSource: how}
	if bi, err := buildinfo.Read(bytes.NewReader(data)); err == nil {
		o.Module, o.GoVersion, o.Deps = bi.Main.Path, bi.GoVersion, gomod.DepList(bi)
	}
	m.Own = append(m.Own, o)
}

func manifestFiles(t *tree.Tree) []FileEntry {
	var out []FileEntry
	t.Walk(func(n *tree.Node) error {
		e := FileEntry{Path: n.Path, Kind: n.Kind.String(), Mode: fmt.Sprintf("%04o", n.Mode), Owner: fmt.Sprintf("%d:%d", n.UID, n.GID), From: n.Owner}
		switch n.Kind {
		case tree.Regular:
			e.SHA256 = sha(n.Data)
		case tree.Symlink:
			e.Target = n.Target
		}
		out = append(out, e)
		return nil
	})
	return out
}

// enabledUnits lists the unit symlinks under /etc/systemd/system.
func enabledUnits(files []FileEntry) []string {
	var out []string
	for _, f := range files {
		if f.Kind == "symlink" && len(f.Path) > len("/etc/systemd/system/") && f.Path[:len("/etc/systemd/system/")] == "/etc/systemd/system/" {
			out = append(out, f.Path[len("/etc/systemd/system/"):]+" -> "+f.Target)
		}
	}
	return out
}

// JSON renders the manifest (stable: struct field order, sorted lists).
func (m *Manifest) JSON() []byte {
	b, _ := json.MarshalIndent(m, "", "  ")
	return append(b, '\n')
}
