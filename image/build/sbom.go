package build

import (
	"bytes"
	"fmt"
	"maps"
	"os"
	"path"
	"regexp"
	"slices"
	"sort"
	"strings"

	"github.com/package-url/packageurl-go"
	"github.com/spdx/tools-golang/json"
	"github.com/spdx/tools-golang/spdx"
	"github.com/spdx/tools-golang/spdx/v2/common"
	"pault.ag/go/debian/dependency"

	"github.com/drover-os/drover/image/deb"
	"github.com/drover-os/drover/image/sources"
	"github.com/drover-os/drover/image/tree"
)

// packageFacts completes the manifest with what the SBOM needs and the lock
// does not hold: the distribution the image's os-release names, and for
// each Debian package its source package (from the .deb's control file),
// the packages of the image it depends on, and the licenses its
// machine-readable copyright file states.
func (b *builder) packageFacts(f *sources.Fetched) error {
	b.man.Distro = imageDistro(b.tree)
	provides := map[string][]string{} // name or virtual name -> packages in the image
	controls := make([]map[string]string, len(b.man.Packages))
	for i, p := range b.man.Packages {
		fh, err := os.Open(f.Debs[p.Name])
		if err != nil {
			return fmt.Errorf("reading the control file of %s: %w", p.Name, err)
		}
		c, err := deb.Control(fh)
		fh.Close()
		if err != nil {
			return fmt.Errorf("%s: %w", p.Name, err)
		}
		controls[i] = c
		provides[p.Name] = append(provides[p.Name], p.Name)
		for _, v := range relationNames(c["Provides"]) {
			provides[v] = append(provides[v], p.Name)
		}
	}
	for i := range b.man.Packages {
		p, c := &b.man.Packages[i], controls[i]
		p.Source, p.SourceVersion = p.Name, p.Version
		if src := strings.Fields(c["Source"]); len(src) > 0 {
			p.Source = src[0]
			if len(src) > 1 {
				p.SourceVersion = strings.Trim(src[1], "()")
			}
		}
		seen := map[string]bool{}
		for _, field := range []string{"Pre-Depends", "Depends"} {
			for _, name := range relationNames(c[field]) {
				for _, q := range provides[name] {
					if q != p.Name && !seen[q] {
						seen[q] = true
						p.Depends = append(p.Depends, q)
					}
				}
			}
		}
		sort.Strings(p.Depends)
		p.Licenses = copyrightLicenses(docCopyright(b.tree, p.Name))
	}
	return nil
}

// relationNames lists every package name a Depends-style field mentions,
// in every alternative: the SBOM records what the image's packages can use,
// and the resolver already chose which alternatives are installed.
func relationNames(field string) []string {
	if strings.TrimSpace(field) == "" {
		return nil
	}
	d, err := dependency.Parse(field)
	if err != nil {
		return nil // the resolver parsed the same field from the index; a control file it cannot read adds no edges
	}
	var out []string
	for _, rel := range d.Relations {
		for _, p := range rel.Possibilities {
			out = append(out, p.Name)
		}
	}
	return out
}

// docCopyright finds a package's copyright file; Debian lets a package's
// doc directory be a symlink to the one of the package it depends on.
func docCopyright(t *tree.Tree, pkg string) *tree.Node {
	return t.Get(resolve(t, "/usr/share/doc/"+pkg) + "/copyright")
}

// resolve follows p while it is a symlink in the tree (a few hops: the
// links it is for are one deep).
func resolve(t *tree.Tree, p string) string {
	for range 4 {
		n := t.Get(p)
		if n == nil || n.Kind != tree.Symlink {
			break
		}
		if strings.HasPrefix(n.Target, "/") {
			p = n.Target
		} else {
			p = path.Join(path.Dir(p), n.Target)
		}
	}
	return p
}

// imageDistro names the distribution the root's os-release describes the
// way syft does for the purl distro qualifier, ID-VERSION_ID ("debian-13"),
// which grype reads to choose the advisories to match. /etc/os-release
// wins over /usr/lib/os-release, as os-release(5) says (Debian makes the
// first a symlink to the second). A release without VERSION_ID (testing,
// sid) or without os-release names none: "".
func imageDistro(t *tree.Tree) string {
	for _, p := range []string{"/etc/os-release", "/usr/lib/os-release"} {
		n := t.Get(resolve(t, p))
		if n == nil || n.Kind != tree.Regular {
			continue
		}
		var id, version string
		for _, line := range strings.Split(string(n.Data), "\n") {
			k, v, _ := strings.Cut(strings.TrimSpace(line), "=")
			v = strings.Trim(v, `"'`)
			switch k {
			case "ID":
				id = v
			case "VERSION_ID":
				version = v
			}
		}
		if id == "" || version == "" {
			return ""
		}
		return id + "-" + version
	}
	return ""
}

// distroOS splits the manifest's distro (os-release ID-VERSION_ID,
// "debian-13") into the name and version of the operating system the
// SBOMs name, which scanners take the OS from: trivy reads the name as
// the OS family and the version as its release, syft (for grype) as ID
// and VERSION_ID. The version is after the last "-": an ID may hold one
// ("opensuse-leap"). No distro (testing, sid): none.
func distroOS(distro string) (name, version string, ok bool) {
	i := strings.LastIndex(distro, "-")
	if i <= 0 || i == len(distro)-1 {
		return "", "", false
	}
	return distro[:i], distro[i+1:], true
}

// debianPURL is a Debian package's package URL as scanners match it (syft
// writes it, grype and trivy read it): pkg:deb/debian/NAME@VERSION with
// the architecture, the image's distro (debian-13), and, where the binary
// package is not named and versioned like its source package,
// upstream=SOURCE or upstream=SOURCE@SOURCEVERSION: Debian's advisories
// name source packages, so that is what grype looks them up by. The
// library does the escaping ("+" in names and versions, "@" in upstream)
// and the canonical qualifier order.
func debianPURL(p Package, distro string) string {
	q := map[string]string{"arch": p.Arch, "distro": distro}
	if p.Source != "" && p.SourceVersion != "" && p.SourceVersion != p.Version {
		q["upstream"] = p.Source + "@" + p.SourceVersion
	} else if p.Source != "" && p.Source != p.Name {
		q["upstream"] = p.Source
	}
	maps.DeleteFunc(q, func(_, v string) bool { return v == "" })
	return packageurl.NewPackageURL(packageurl.TypeDebian, "debian", p.Name, p.Version, packageurl.QualifiersFromMap(q), "").ToString()
}

// goPURL is the package URL of a Go module: its path up to the last slash
// is the namespace. The path keeps its case: the Go module proxy and the Go
// vulnerability database name modules case-sensitively.
func goPURL(modulePath, version string) string {
	ns, name := "", modulePath
	if i := strings.LastIndex(modulePath, "/"); i >= 0 {
		ns, name = modulePath[:i], modulePath[i+1:]
	}
	return packageurl.NewPackageURL(packageurl.TypeGolang, ns, name, version, nil, "").ToString()
}

// copyrightLicenses returns the license short names a machine-readable
// (DEP-5) copyright file states, in order of appearance, once each. A
// free-form copyright file states none that can be read reliably.
func copyrightLicenses(n *tree.Node) []string {
	if n == nil || n.Kind != tree.Regular || !bytes.HasPrefix(n.Data, []byte("Format:")) {
		return nil
	}
	var out []string
	seen := map[string]bool{}
	for _, line := range strings.Split(string(n.Data), "\n") {
		v, ok := strings.CutPrefix(line, "License:")
		if v = strings.TrimSpace(v); !ok || v == "" || seen[v] {
			continue
		}
		seen[v] = true
		out = append(out, v)
	}
	return out
}

// debianToSPDX maps the DEP-5 short names Debian uses most to SPDX license
// expressions (keys lower case). Any other name becomes a LicenseRef (see
// spdxLicense): a guessed SPDX identifier would be worse than a reference.
var debianToSPDX = map[string]string{
	"gpl-1": "GPL-1.0-only", "gpl-1+": "GPL-1.0-or-later", "gpl-2": "GPL-2.0-only", "gpl-2+": "GPL-2.0-or-later",
	"gpl-3": "GPL-3.0-only", "gpl-3+": "GPL-3.0-or-later", "lgpl-2": "LGPL-2.0-only", "lgpl-2+": "LGPL-2.0-or-later",
	"lgpl-2.1": "LGPL-2.1-only", "lgpl-2.1+": "LGPL-2.1-or-later", "lgpl-3": "LGPL-3.0-only", "lgpl-3+": "LGPL-3.0-or-later",
	"agpl-3": "AGPL-3.0-only", "agpl-3+": "AGPL-3.0-or-later", "gfdl-1.3": "GFDL-1.3-only", "gfdl-1.3+": "GFDL-1.3-or-later",
	"expat": "MIT", "mit": "MIT", "apache-2": "Apache-2.0", "apache-2.0": "Apache-2.0", "bsd-2-clause": "BSD-2-Clause",
	"bsd-3-clause": "BSD-3-Clause", "bsd-4-clause": "BSD-4-Clause", "0bsd": "0BSD", "isc": "ISC", "zlib": "Zlib",
	"mpl-1.1": "MPL-1.1", "mpl-2.0": "MPL-2.0", "cc0-1.0": "CC0-1.0", "cc-by-sa-4.0": "CC-BY-SA-4.0", "cc-by-4.0": "CC-BY-4.0",
	"artistic": "Artistic-1.0-Perl", "artistic-2.0": "Artistic-2.0", "afl-2.1": "AFL-2.1", "beerware": "Beerware",
	"bsl-1.0": "BSL-1.0", "unicode-dfs-2016": "Unicode-DFS-2016", "fsfap": "FSFAP", "fsfullr": "FSFULLR", "fsful": "FSFUL",
	"openssl": "OpenSSL", "curl": "curl", "python-2.0": "Python-2.0", "sleepycat": "Sleepycat", "x11": "X11", "unlicense": "Unlicense",
	"gpl-2 with linux-syscall-note exception":  "GPL-2.0-only WITH Linux-syscall-note",
	"gpl-2+ with linux-syscall-note exception": "GPL-2.0-or-later WITH Linux-syscall-note",
}

// spdxLicense turns the DEP-5 license names of a copyright file into one
// SPDX expression joined by AND (each stanza covers other files). Within a
// name, " or " and " and " become OR and AND ("GPL-2+ or MIT" →
// "(GPL-2.0-or-later OR MIT)"); each short name maps to its SPDX
// identifier, or else to LicenseRef-<name>, returned in refs (the Debian
// name by reference ID) for the document's extracted licensing info. A name
// with a comma (DEP-5 precedence) is one reference as a whole. No names:
// NOASSERTION.
func spdxLicense(names []string) (expr string, refs map[string]string) {
	if len(names) == 0 {
		return "NOASSERTION", nil
	}
	refs = map[string]string{}
	one := func(n string) string {
		if id, ok := debianToSPDX[strings.ToLower(strings.TrimSpace(n))]; ok {
			return id
		}
		ref := "LicenseRef-" + strings.Trim(licenseRefChars.ReplaceAllString(n, "-"), "-")
		refs[ref] = strings.TrimSpace(n)
		return ref
	}
	var terms []string
	for _, n := range names {
		if _, ok := debianToSPDX[strings.ToLower(n)]; ok || strings.Contains(n, ",") {
			terms = append(terms, one(n))
			continue
		}
		op, parts := " OR ", strings.Split(n, " or ")
		if len(parts) == 1 {
			op, parts = " AND ", strings.Split(n, " and ")
		}
		if len(parts) == 1 || slices.ContainsFunc(parts, func(p string) bool { return strings.Contains(p, " and ") }) {
			terms = append(terms, one(n)) // a single name, or "a or b and c": one reference
			continue
		}
		ids := make([]string, len(parts))
		for i, p := range parts {
			ids[i] = one(p)
		}
		terms = append(terms, "("+strings.Join(ids, op)+")")
	}
	return strings.Join(terms, " AND "), refs
}

var licenseRefChars = regexp.MustCompile(`[^A-Za-z0-9.]+`)

// sbom renders the SPDX 2.3 JSON document of the image with
// github.com/spdx/tools-golang: the image, every Debian package (version,
// arch, source package, licenses, the .deb's sha256), every Go binary (the
// Go components and drover-agent / drover-init) with every module of its
// build list, and the URL components; the image CONTAINS the operating
// system (Debian and its release, from the image's os-release) which
// CONTAINS every Debian package, and the image CONTAINS each Go binary and
// URL component; a Debian package DEPENDS_ON the packages of the image its
// Depends and Pre-Depends name, a Go binary DEPENDS_ON each module linked
// into it. Without a distro (testing, sid) there is no operating system
// package and the image CONTAINS the Debian packages.
func sbom(m *Manifest) ([]byte, error) {
	doc := &spdx.Document{
		SPDXVersion: spdx.Version, DataLicense: spdx.DataLicense, SPDXIdentifier: "DOCUMENT",
		DocumentName:      m.Name + "-" + m.Version,
		DocumentNamespace: "https://drover.dev/spdx/" + m.Name + "/" + m.RootHash,
		CreationInfo: &spdx.CreationInfo{Created: epochString(m.Epoch),
			Creators:       []common.Creator{{CreatorType: "Tool", Creator: strings.ReplaceAll(m.Builder, " ", "-")}},
			CreatorComment: "builder " + m.Builder + ", compiled from a source whose state is " + string(m.BuilderSource.Known())},
	}
	ids := map[string]bool{}
	id := func(kind, name string) common.ElementID {
		r := strings.NewReplacer("+", "-", "~", "-", ":", "-", "/", "-", "_", "-", "@", "-", " ", "-", "(", "", ")", "")
		base := "SPDXRef-" + kind + "-" + r.Replace(name)
		e := base
		for n := 2; ids[e]; n++ { // two names may map to one ID ("a+b" and "a-b")
			e = fmt.Sprintf("%s-%d", base, n)
		}
		ids[e] = true
		return common.ElementID(strings.TrimPrefix(e, "SPDXRef-"))
	}
	rel := func(a common.ElementID, typ string, b common.ElementID) {
		doc.Relationships = append(doc.Relationships, &spdx.Relationship{
			RefA: common.MakeDocElementID("", string(a)), Relationship: typ, RefB: common.MakeDocElementID("", string(b))})
	}
	purl := func(locator string) []*spdx.PackageExternalReference {
		return []*spdx.PackageExternalReference{{Category: "PACKAGE-MANAGER", RefType: "purl", Locator: locator}}
	}
	sha256sum := func(v string) []common.Checksum { return []common.Checksum{{Algorithm: common.SHA256, Value: v}} }
	add := func(p *spdx.Package) common.ElementID {
		if p.PackageDownloadLocation == "" {
			p.PackageDownloadLocation = "NOASSERTION"
		}
		if p.PackageLicenseConcluded == "" {
			p.PackageLicenseConcluded = "NOASSERTION"
		}
		if p.PackageLicenseDeclared == "" {
			p.PackageLicenseDeclared = "NOASSERTION"
		}
		p.PackageCopyrightText = "NOASSERTION"
		doc.Packages = append(doc.Packages, p)
		return p.PackageSPDXIdentifier
	}

	// The image is not the operating system package: that is Debian, below,
	// and a second OPERATING_SYSTEM package would leave a scanner to guess.
	image := add(&spdx.Package{PackageName: m.Name, PackageSPDXIdentifier: id("image", m.Name), PackageVersion: m.Version,
		PrimaryPackagePurpose: "OTHER", PackageComment: "drover image, build " + m.BuildID + ", root hash " + m.RootHash})
	rel("DOCUMENT", "DESCRIBES", image)
	// trivy takes the package whose SPDX ID starts with OperatingSystem as
	// the OS (name: family, versionInfo: release) when the image CONTAINS it,
	// and scans the Debian packages it CONTAINS against that release.
	debParent := image
	if name, version, ok := distroOS(m.Distro); ok {
		debParent = add(&spdx.Package{PackageName: name, PackageSPDXIdentifier: id("OperatingSystem", name), PackageVersion: version,
			PrimaryPackagePurpose: "OPERATING_SYSTEM", PackageComment: "the distribution of the image's os-release: " + m.Distro})
		rel(image, "CONTAINS", debParent)
	}

	debIDs := map[string]common.ElementID{}
	refs := map[string]string{}
	for _, p := range m.Packages {
		declared, pkgRefs := spdxLicense(p.Licenses)
		maps.Copy(refs, pkgRefs)
		x := &spdx.Package{PackageName: p.Name, PackageSPDXIdentifier: id("deb", p.Name), PackageVersion: p.Version,
			PackageFileName: p.Path[strings.LastIndex(p.Path, "/")+1:], PackageChecksums: sha256sum(p.SHA256),
			PackageSupplier:           &common.Supplier{SupplierType: "Organization", Supplier: "Debian"},
			PackageExternalReferences: purl(debianPURL(p, m.Distro)), PrimaryPackagePurpose: "LIBRARY",
			PackageLicenseDeclared: declared}
		if p.Source != "" && p.SourceVersion != "" {
			// In the words trivy reads the source package from (its
			// advisories are by source package; it ignores the purl's upstream).
			x.PackageSourceInfo = "built package from: " + p.Source + " " + p.SourceVersion
		}
		if len(p.Licenses) > 0 {
			x.PackageLicenseComments = "debian/copyright states: " + strings.Join(p.Licenses, "; ")
		}
		debIDs[p.Name] = add(x)
		rel(debParent, "CONTAINS", debIDs[p.Name])
	}
	for _, p := range m.Packages {
		for _, d := range p.Depends {
			if q, ok := debIDs[d]; ok {
				rel(debIDs[p.Name], "DEPENDS_ON", q)
			}
		}
	}

	modIDs := map[string]common.ElementID{} // path@version -> package
	goBinary := func(bin *spdx.Package, deps []string) error {
		bid := add(bin)
		rel(image, "CONTAINS", bid)
		for _, d := range deps {
			mod, sum, _ := strings.Cut(d, " ")
			modPath, version, _ := strings.Cut(mod, "@")
			mid, ok := modIDs[mod]
			if !ok {
				if !strings.HasPrefix(sum, "h1:") {
					return fmt.Errorf("SBOM: module %s of %s has no h1: hash in its build info", mod, bin.PackageName)
				}
				mid = add(&spdx.Package{PackageName: modPath, PackageSPDXIdentifier: id("gomod", mod), PackageVersion: version,
					PackageExternalReferences: purl(goPURL(modPath, version)), PrimaryPackagePurpose: "LIBRARY",
					PackageComment: "go.sum " + sum})
				modIDs[mod] = mid
			}
			rel(bid, "DEPENDS_ON", mid)
		}
		return nil
	}
	for _, g := range m.Go {
		bin := &spdx.Package{PackageName: g.Name, PackageSPDXIdentifier: id("go", g.Name), PackageVersion: g.Version,
			PackageFileName: g.Install, PackageChecksums: sha256sum(g.SHA256), PrimaryPackagePurpose: "APPLICATION",
			PackageExternalReferences: purl(goPURL(g.Module, g.Version)),
			PackageComment:            "Go binary of package " + g.Package + ", built with " + g.GoVersion}
		if err := goBinary(bin, g.Deps); err != nil {
			return nil, err
		}
	}
	for _, o := range m.Own {
		name := o.Path[strings.LastIndex(o.Path, "/")+1:]
		bin := &spdx.Package{PackageName: name, PackageSPDXIdentifier: id("drover", name), PackageVersion: o.version(m.Builder),
			PackageFileName: o.Path, PackageChecksums: sha256sum(o.SHA256), PrimaryPackagePurpose: "APPLICATION",
			PackageSupplier: &common.Supplier{SupplierType: "Organization", Supplier: "drover"}}
		if o.Module != "" {
			bin.PackageComment = "Go binary of module " + o.Module + ", built with " + o.GoVersion
		}
		if o.Source != nil {
			bin.PackageComment = strings.TrimPrefix(bin.PackageComment+"; compiled from "+o.Source.String()+", source state "+string(o.Source.State.Known()), "; ")
		}
		if o.In != "" {
			bin.PackageComment = strings.TrimPrefix(bin.PackageComment+"; in the "+o.In+", not the root file system", "; ")
		}
		if err := goBinary(bin, o.Deps); err != nil {
			return nil, err
		}
	}
	for _, u := range m.URLs {
		x := add(&spdx.Package{PackageName: u.Name, PackageSPDXIdentifier: id("url", u.Name), PackageDownloadLocation: u.URL,
			PackageChecksums: sha256sum(u.SHA256), PrimaryPackagePurpose: "FILE"})
		rel(image, "CONTAINS", x)
	}
	if ci := m.CachedImages; ci != nil {
		// A cached image on the cache disk is part of what the build
		// ships, not of the node image's root: the disk is a package the
		// document describes too, and it contains them.
		var disk common.ElementID
		if ci.Disk != nil {
			disk = add(&spdx.Package{PackageName: ci.Disk.File, PackageSPDXIdentifier: id("cachedisk", ci.Disk.File), PackageFileName: ci.Disk.File,
				PackageChecksums: sha256sum(ci.Disk.SHA256), PrimaryPackagePurpose: "FILE",
				PackageComment: "drover image cache disk: erofs labelled " + ci.Disk.Label + ", UUID " + ci.Disk.UUID + ", an OCI image layout of the images it contains"})
			rel("DOCUMENT", "DESCRIBES", disk)
		}
		for _, c := range ci.Images {
			x := add(&spdx.Package{PackageName: c.Ref[:strings.LastIndex(c.Ref, "@")], PackageSPDXIdentifier: id("oci", c.Ref),
				PackageVersion: c.Digest, PackageChecksums: sha256sum(strings.TrimPrefix(c.Digest, "sha256:")), PrimaryPackagePurpose: "CONTAINER",
				PackageExternalReferences: purl(ociPURL(c)),
				PackageComment:            fmt.Sprintf("cached workload image, %s manifest %s, %d bytes, in the %s", c.Platform, c.Manifest, c.Size, c.Location)})
			if c.Location == "disk" && disk != "" {
				rel(disk, "CONTAINS", x)
			} else {
				rel(image, "CONTAINS", x)
			}
		}
	}
	for _, ref := range slices.Sorted(maps.Keys(refs)) {
		doc.OtherLicenses = append(doc.OtherLicenses, &spdx.OtherLicense{LicenseIdentifier: ref, LicenseName: refs[ref],
			ExtractedText: fmt.Sprintf("Debian license short name %q (DEP-5): its text is in /usr/share/doc/<package>/copyright of each package that states it.", refs[ref])})
	}
	var buf bytes.Buffer
	if err := json.Write(doc, &buf, json.Indent("  ")); err != nil {
		return nil, fmt.Errorf("writing the SPDX SBOM: %w", err)
	}
	return buf.Bytes(), nil
}
