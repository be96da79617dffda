package build

import (
	"bytes"
	"fmt"
	"strings"

	cdx "github.com/CycloneDX/cyclonedx-go"
	"github.com/google/uuid"
	"pault.ag/go/debian/version"
)

// cycloneDX renders the same inventory as the SPDX SBOM as CycloneDX 1.6
// JSON with github.com/CycloneDX/cyclonedx-go, since container and node
// scanners read either: the image is the metadata component; the operating
// system (Debian and its release, from the image's os-release), every Debian
// package, Go binary, Go module and URL component is a component with its
// purl and hashes; the dependency graph says what the image, the operating
// system, each package and each binary depend on, the way trivy writes it:
// the image on the operating system, the operating system on every Debian
// package. Modules carry their go.sum hash as a property: CycloneDX hashes
// are of files, and h1 is a hash of a module's file tree.
//
// The image is a platform, not an operating-system component: trivy takes
// the one operating-system component (the metadata one included) as the OS,
// its name as the family, and warns and picks at random, or fails, when
// there are two; it refuses a metadata component of a type it does not
// know (device, firmware, file), and syft reads a container one as an image
// reference. Syft takes the first operating-system component as the distro.
func cycloneDX(m *Manifest) ([]byte, error) {
	bom := cdx.NewBOM()
	bom.SerialNumber = uuid.UUID(derive16("cyclonedx-serial", m.RootHash)).URN()
	sha := func(v string) *[]cdx.Hash { return &[]cdx.Hash{{Algorithm: cdx.HashAlgoSHA256, Value: v}} }
	props := func(kv ...string) *[]cdx.Property {
		var ps []cdx.Property
		for i := 0; i+1 < len(kv); i += 2 {
			if kv[i+1] != "" {
				ps = append(ps, cdx.Property{Name: kv[i], Value: kv[i+1]})
			}
		}
		if len(ps) == 0 {
			return nil
		}
		return &ps
	}
	imageRef := "image:" + m.Name
	bom.Metadata = &cdx.Metadata{
		Timestamp: epochString(m.Epoch),
		Tools: &cdx.ToolsChoice{Components: &[]cdx.Component{{Type: cdx.ComponentTypeApplication, Name: "drover",
			Version: strings.TrimPrefix(m.Builder, "drover "), Properties: props("drover:sourceState", string(m.BuilderSource.Known()))}}},
		Component: &cdx.Component{BOMRef: imageRef, Type: cdx.ComponentTypePlatform, Name: m.Name, Version: m.Version,
			Properties: props("drover:buildID", m.BuildID, "drover:rootHash", m.RootHash)},
	}
	var comps []cdx.Component
	deps := map[string][]string{}
	var order []string // refs in document order, for a stable dependency list
	dependsOn := func(from, to string) {
		if _, ok := deps[from]; !ok {
			order = append(order, from)
		}
		deps[from] = append(deps[from], to)
	}
	debParent := imageRef
	if name, version, ok := distroOS(m.Distro); ok {
		debParent = "os:" + m.Distro
		comps = append(comps, cdx.Component{BOMRef: debParent, Type: cdx.ComponentTypeOS, Name: name, Version: version})
		dependsOn(imageRef, debParent)
	}
	refOf := map[string]string{}
	for _, p := range m.Packages {
		ref := debianPURL(p, m.Distro)
		refOf[p.Name] = ref
		c := cdx.Component{BOMRef: ref, Type: cdx.ComponentTypeLibrary, Name: p.Name, Version: p.Version, PackageURL: ref,
			Supplier: &cdx.OrganizationalEntity{Name: "Debian"}, Hashes: sha(p.SHA256),
			Properties: props(append([]string{"drover:debianSource", strings.TrimSpace(p.Source + " " + p.SourceVersion),
				"drover:debianLicenses", strings.Join(p.Licenses, "; ")}, trivySource(p)...)...)}
		if expr, _ := spdxLicense(p.Licenses); expr != "NOASSERTION" {
			c.Licenses = &cdx.Licenses{{Expression: expr}}
		}
		comps = append(comps, c)
		dependsOn(debParent, ref)
	}
	for _, p := range m.Packages {
		for _, d := range p.Depends {
			dependsOn(refOf[p.Name], refOf[d])
		}
	}
	modules := map[string]bool{}
	binary := func(c cdx.Component, mods []string) error {
		comps = append(comps, c)
		dependsOn(imageRef, c.BOMRef)
		for _, d := range mods {
			mod, sum, _ := strings.Cut(d, " ")
			if !strings.HasPrefix(sum, "h1:") {
				return fmt.Errorf("CycloneDX SBOM: module %s of %s has no h1: hash in its build info", mod, c.Name)
			}
			modPath, version, _ := strings.Cut(mod, "@")
			ref := goPURL(modPath, version)
			if !modules[ref] {
				modules[ref] = true
				comps = append(comps, cdx.Component{BOMRef: ref, Type: cdx.ComponentTypeLibrary, Name: modPath, Version: version,
					PackageURL: ref, Properties: props("drover:goSum", sum)})
			}
			dependsOn(c.BOMRef, ref)
		}
		return nil
	}
	for _, g := range m.Go {
		c := cdx.Component{BOMRef: "go:" + g.Name, Type: cdx.ComponentTypeApplication, Name: g.Name, Version: g.Version,
			PackageURL: goPURL(g.Module, g.Version), Hashes: sha(g.SHA256),
			Properties: props("drover:install", g.Install, "drover:goPackage", g.Package, "drover:toolchain", g.GoVersion)}
		if err := binary(c, g.Deps); err != nil {
			return nil, err
		}
	}
	for _, o := range m.Own {
		name := o.Path[strings.LastIndex(o.Path, "/")+1:]
		commit, state := "", ""
		if o.Source != nil {
			commit, state = o.Source.Commit, string(o.Source.State.Known())
		}
		c := cdx.Component{BOMRef: "drover:" + name, Type: cdx.ComponentTypeApplication, Name: name,
			Version: o.version(m.Builder), Hashes: sha(o.SHA256),
			Properties: props("drover:install", o.Path, "drover:toolchain", o.GoVersion, "drover:built", o.Built,
				"drover:commit", commit, "drover:sourceState", state, "drover:in", o.In)}
		if err := binary(c, o.Deps); err != nil {
			return nil, err
		}
	}
	for _, u := range m.URLs {
		ref := "url:" + u.Name
		comps = append(comps, cdx.Component{BOMRef: ref, Type: cdx.ComponentTypeFile, Name: u.Name, Hashes: sha(u.SHA256),
			ExternalReferences: &[]cdx.ExternalReference{{Type: cdx.ERTypeDistribution, URL: u.URL}}})
		dependsOn(imageRef, ref)
	}
	if ci := m.CachedImages; ci != nil {
		for _, c := range ci.Images {
			ref := "oci:" + c.Ref
			comps = append(comps, cdx.Component{BOMRef: ref, Type: cdx.ComponentTypeContainer, Name: c.Ref[:strings.LastIndex(c.Ref, "@")],
				Version: c.Digest, PackageURL: ociPURL(c), Hashes: sha(strings.TrimPrefix(c.Digest, "sha256:")),
				Properties: props("drover:platform", c.Platform, "drover:manifest", c.Manifest, "drover:location", c.Location)})
			dependsOn(imageRef, ref)
		}
	}
	var graph []cdx.Dependency
	for _, ref := range order {
		on := deps[ref]
		graph = append(graph, cdx.Dependency{Ref: ref, Dependencies: &on})
	}
	bom.Components, bom.Dependencies = &comps, &graph
	var buf bytes.Buffer
	enc := cdx.NewBOMEncoder(&buf, cdx.BOMFileFormatJSON)
	enc.SetPretty(true)
	if err := enc.EncodeVersion(bom, cdx.SpecVersion1_6); err != nil {
		return nil, fmt.Errorf("writing the CycloneDX SBOM: %w", err)
	}
	return buf.Bytes(), nil
}

// trivySource is the source package of a Debian package as trivy reads it
// from a CycloneDX SBOM: its properties aquasecurity:trivy:SrcName,
// SrcVersion (upstream version), SrcRelease (Debian revision) and SrcEpoch,
// split as trivy writes them. trivy looks Debian's advisories up by source
// package and reads it from nowhere else (not the purl's upstream): without
// them it looks libc6 up as libc6 rather than glibc, and finds nothing.
func trivySource(p Package) []string {
	if p.Source == "" || p.SourceVersion == "" {
		return nil
	}
	kv := []string{"aquasecurity:trivy:SrcName", p.Source, "aquasecurity:trivy:SrcVersion", p.SourceVersion}
	v, err := version.Parse(p.SourceVersion)
	if err != nil {
		return kv // the whole version still compares right
	}
	kv[3] = v.Version
	kv = append(kv, "aquasecurity:trivy:SrcRelease", v.Revision)
	if v.Epoch != 0 {
		kv = append(kv, "aquasecurity:trivy:SrcEpoch", fmt.Sprint(v.Epoch))
	}
	return kv
}
