package diff

import (
	"strings"

	"github.com/drover-os/drover/image/build"
	"github.com/drover-os/drover/image/debian"
	"github.com/drover-os/drover/image/uki"
)

func compareInputs(old, new *build.Manifest) []Change {
	out := []Change{}
	for _, c := range []*Change{
		changed("recipe", old.RecipeSHA256, new.RecipeSHA256),
		changed("lock", old.LockSHA256, new.LockSHA256),
		changed("builder", old.Builder, new.Builder),
	} {
		if c != nil {
			out = append(out, *c)
		}
	}
	suite := func(m *build.Manifest) map[string]string {
		s := map[string]string{}
		for _, x := range m.Suites {
			s[x.Name] = x.Date.UTC().Format("2006-01-02T15:04:05Z") + " " + x.InRelease
		}
		return s
	}
	os, ns := suite(old), suite(new)
	for _, name := range unionKeys(os, ns) {
		if c := changed("suite "+name, os[name], ns[name]); c != nil {
			out = append(out, *c)
		}
	}
	return out
}

func comparePackages(old, new []build.Package) []PackageChange {
	om, nm := byName(old, func(p build.Package) string { return p.Name }), byName(new, func(p build.Package) string { return p.Name })
	out := []PackageChange{}
	for _, name := range unionKeys(om, nm) {
		o, inOld := om[name]
		n, inNew := nm[name]
		switch {
		case !inOld:
			out = append(out, PackageChange{Name: name, New: n.Version})
		case !inNew:
			out = append(out, PackageChange{Name: name, Old: o.Version})
		case o.Arch != n.Arch:
			out = append(out, PackageChange{Name: name, Old: o.Version + " " + o.Arch, New: n.Version + " " + n.Arch, SameVersion: o.Version == n.Version})
		case o.Version != n.Version:
			// A security update: a newer version from a -security suite.
			security := debian.IsSecuritySuite(n.Suite) && debian.CompareVersions(n.Version, o.Version) > 0
			out = append(out, PackageChange{Name: name, Old: o.Version, New: n.Version, Security: security})
		case o.SHA256 != n.SHA256:
			out = append(out, PackageChange{Name: name, Old: o.Version, New: n.Version, Note: "same version, different .deb (sha256 " + o.SHA256 + " → " + n.SHA256 + ")"})
		}
	}
	return out
}

func compareGo(old, new []build.GoComponent) []GoChange {
	key := func(g build.GoComponent) string { return g.Name }
	om, nm := byName(old, key), byName(new, key)
	side := func(g build.GoComponent) *GoSide {
		return &GoSide{Module: g.Module, Version: g.Version, SHA256: g.SHA256, GoVersion: g.GoVersion}
	}
	out := []GoChange{}
	for _, name := range unionKeys(om, nm) {
		o, inOld := om[name]
		n, inNew := nm[name]
		c := GoChange{Name: name, DepsAdded: []string{}, DepsRemoved: []string{}}
		switch {
		case !inOld:
			c.New = side(n)
		case !inNew:
			c.Old = side(o)
		default:
			c.Old, c.New = side(o), side(n)
			deps := compareLists(o.Deps, n.Deps)
			c.DepsAdded, c.DepsRemoved = deps.Added, deps.Removed
			if *c.Old == *c.New && o.Package == n.Package && o.Install == n.Install && len(deps.Added)+len(deps.Removed) == 0 {
				continue
			}
		}
		out = append(out, c)
	}
	return out
}

func compareURLs(old, new []lockURL) []URLChange {
	key := func(u lockURL) string { return u.Name }
	om, nm := byName(old, key), byName(new, key)
	side := func(u lockURL) *URLSide { return &URLSide{URL: u.URL, SHA256: u.SHA256, Size: u.Size} }
	return changedSides(om, nm, side, func(name string, o, n *URLSide) URLChange { return URLChange{Name: name, Old: o, New: n} })
}

// changedSides compares two keyed sets whose items reduce to a comparable
// side: one change per key added, removed or with another side (nil Old
// or New for a side that is missing), in key order.
func changedSides[T any, S comparable, C any](om, nm map[string]T, side func(T) *S, change func(name string, o, n *S) C) []C {
	out := []C{}
	for _, name := range unionKeys(om, nm) {
		var was, is *S
		if o, ok := om[name]; ok {
			was = side(o)
		}
		if n, ok := nm[name]; ok {
			is = side(n)
		}
		if was != nil && is != nil && *was == *is {
			continue
		}
		out = append(out, change(name, was, is))
	}
	return out
}

// compareLists compares two lists as sets; Reordered notes the same set in
// another order.
func compareLists(old, new []string) ListChange {
	in := func(l []string) map[string]bool {
		s := map[string]bool{}
		for _, x := range l {
			s[x] = true
		}
		return s
	}
	os, ns := in(old), in(new)
	c := ListChange{Added: []string{}, Removed: []string{}}
	for _, x := range unionKeys(os, ns) {
		switch {
		case !os[x]:
			c.Added = append(c.Added, x)
		case !ns[x]:
			c.Removed = append(c.Removed, x)
		}
	}
	if len(c.Added) == 0 && len(c.Removed) == 0 && strings.Join(old, "\x00") != strings.Join(new, "\x00") {
		c.Reordered = true
	}
	return c
}

// compareSets is compareLists for lists whose order means nothing.
func compareSets(old, new []string) ListChange {
	c := compareLists(old, new)
	c.Reordered = false
	return c
}

func excludedList(m *build.Manifest) []string {
	var out []string
	for _, e := range m.Excluded {
		out = append(out, e.Name+" "+e.Version)
	}
	return out
}

func removedList(m *build.Manifest) []string {
	var out []string
	for _, r := range m.Removed {
		out = append(out, r.Glob)
	}
	return out
}

// setuidList reads the manifest's setuid list; a manifest written before
// it existed (nil) has the same facts in its files.
func setuidList(m *build.Manifest) []string {
	files := m.Setuid
	if files == nil {
		files = build.SetuidFiles(m.Files)
	}
	var out []string
	for _, f := range files {
		out = append(out, f.Path+" "+f.Mode+" "+f.Owner)
	}
	return out
}

func compareESP(old, new []build.ESPFile) []ESPChange {
	key := func(f build.ESPFile) string { return f.Path }
	om, nm := byName(old, key), byName(new, key)
	out := []ESPChange{}
	for _, p := range unionKeys(om, nm) {
		o, inOld := om[p]
		n, inNew := nm[p]
		switch {
		case !inOld:
			out = append(out, ESPChange{Path: p, Change: Added, New: n.SHA256})
		case !inNew:
			out = append(out, ESPChange{Path: p, Change: Removed, Old: o.SHA256})
		case o.SHA256 != n.SHA256:
			out = append(out, ESPChange{Path: p, Change: Changed, Old: o.SHA256, New: n.SHA256, Details: espDetails(o, n)})
		}
	}
	return out
}

// espDetails says what changed inside an EFI binary: the signature, and
// for the UKI each PE section whose content differs.
func espDetails(o, n build.ESPFile) []string {
	details := []string{}
	switch {
	case o.SignedBy == "" && n.SignedBy != "":
		details = append(details, "signed by "+n.SignedBy)
	case o.SignedBy != "" && n.SignedBy == "":
		details = append(details, "signature removed (was "+o.SignedBy+")")
	case o.SignedBy != n.SignedBy:
		details = append(details, "signer "+o.SignedBy+" → "+n.SignedBy)
	}
	key := func(s uki.Section) string { return s.Name }
	os, ns := byName(o.Sections, key), byName(n.Sections, key)
	for _, name := range unionKeys(os, ns) {
		a, inOld := os[name]
		b, inNew := ns[name]
		switch {
		case !inOld:
			details = append(details, "section "+name+" added")
		case !inNew:
			details = append(details, "section "+name+" removed")
		case a.SHA256 != b.SHA256:
			details = append(details, "section "+name+" sha256 "+a.SHA256+" → "+b.SHA256)
		}
	}
	return details
}

// comparePartitions lists partitions that moved, were resized or whose
// content differs. With espFilesChanged the ESP's content digest is not
// reported: the changed boot files are the change and are listed.
func comparePartitions(old, new []build.Partition, espFilesChanged bool) []PartitionChange {
	key := func(p build.Partition) string { return p.Name }
	om, nm := byName(old, key), byName(new, key)
	out := []PartitionChange{}
	for _, name := range unionKeys(om, nm) {
		o, inOld := om[name]
		n, inNew := nm[name]
		var details []string
		switch {
		case !inOld:
			details = []string{Added}
		case !inNew:
			details = []string{Removed}
		default:
			newSHA := n.SHA256
			if name == "esp" && espFilesChanged {
				newSHA = o.SHA256
			}
			details = fieldChanges(
				[3]string{"index", itoa(int64(o.Index)), itoa(int64(n.Index))},
				[3]string{"type", o.Type, n.Type},
				[3]string{"uuid", o.UUID, n.UUID},
				[3]string{"offset", itoa(o.Offset), itoa(n.Offset)},
				[3]string{"size", itoa(o.Size), itoa(n.Size)},
				[3]string{"sha256", o.SHA256, newSHA},
			)
		}
		if len(details) > 0 {
			out = append(out, PartitionChange{Name: name, Details: details})
		}
	}
	return out
}
