package debian

import (
	"strings"

	"pault.ag/go/debian/version"
)

// Package is one binary package stanza of a Packages index, reduced to the
// fields drover needs. Relation fields are kept raw and parsed only for the
// packages that enter a closure.
type Package struct {
	Name          string
	Version       string
	Architecture  string
	Filename      string // relative to the mirror root, e.g. pool/main/s/systemd/systemd_257.9-1_amd64.deb
	Size          int64
	SHA256        string
	Source        string // as written: "name" or "name (version)"; empty when equal to Name
	Section       string
	Priority      string
	Essential     bool
	MultiArch     string
	InstalledSize int64 // KiB

	// Suite is the suite whose index listed the package (set by the
	// client, not a field of the stanza): the archive Filename is in.
	Suite string

	Depends    string
	PreDepends string
	Provides   string
	Conflicts  string
	Breaks     string
}

// URL is where the .deb is on mirror (the archive root).
func (p Package) URL(mirror string) string {
	return strings.TrimRight(mirror, "/") + "/" + strings.TrimLeft(p.Filename, "/")
}

// SourcePackage returns the source package name and version, which Debian
// omits from a binary stanza when they equal the binary's own.
func (p Package) SourcePackage() (name, version string) {
	src := strings.TrimSpace(p.Source)
	if src == "" {
		return p.Name, p.Version
	}
	name, rest, ok := strings.Cut(src, " ")
	if !ok {
		return name, p.Version
	}
	rest = strings.TrimSpace(rest)
	rest = strings.TrimPrefix(rest, "(")
	rest = strings.TrimSuffix(rest, ")")
	return name, strings.TrimSpace(rest)
}

// String is "name version" (the form used in messages).
func (p Package) String() string {
	return p.Name + " " + p.Version
}

// CompareVersions orders Debian versions as dpkg does (epoch, upstream,
// revision; ~ before anything); a version that does not parse sorts
// before those that do. The build records changelog entries in this order,
// and diff and outdated compare versions by it.
func CompareVersions(a, b string) int {
	va, errA := version.Parse(strings.TrimSpace(a))
	vb, errB := version.Parse(strings.TrimSpace(b))
	if errA != nil || errB != nil {
		return boolInt(errA == nil) - boolInt(errB == nil)
	}
	return version.Compare(va, vb)
}

func boolInt(b bool) int {
	if b {
		return 1
	}
	return 0
}
