package build

import (
	"strings"
	"testing"

	"github.com/package-url/packageurl-go"
	"github.com/spdx/tools-golang/spdx/v2/common"
)

// A cached image is a CONTAINER package with an oci package URL that the
// purl library reads back as the image: its digest, repository and tag;
// one in the root is in the node image, one on the cache disk in the disk,
// which the document describes too.
func TestSBOMCachedImages(t *testing.T) {
	data, err := sbom(sbomManifest())
	if err != nil {
		t.Fatal(err)
	}
	doc := readSBOM(t, data)
	idName := map[common.ElementID]string{}
	byName := map[string]int{}
	for i, p := range doc.Packages {
		idName[p.PackageSPDXIdentifier] = p.PackageName
		byName[p.PackageName] = i
	}
	i, ok := byName["registry.example.test/team/web:v1.2"]
	if !ok {
		t.Fatalf("no package for the root image: %v", idName)
	}
	web := doc.Packages[i]
	if web.PrimaryPackagePurpose != "CONTAINER" || web.PackageVersion != "sha256:"+strings.Repeat("5", 64) || len(web.PackageExternalReferences) != 1 {
		t.Fatalf("root image package %+v", web)
	}
	u, err := packageurl.FromString(web.PackageExternalReferences[0].Locator)
	q := u.Qualifiers.Map()
	if err != nil || u.Type != "oci" || u.Name != "web" || u.Version != "sha256:"+strings.Repeat("5", 64) || q["repository_url"] != "registry.example.test/team/web" || q["tag"] != "v1.2" || q["arch"] != "amd64" {
		t.Errorf("purl %s reads back as %+v (%v)", web.PackageExternalReferences[0].Locator, u, err)
	}
	j := byName["registry.example.test:5000/ml/model"]
	l := doc.Packages[j].PackageExternalReferences[0].Locator
	if u, err := packageurl.FromString(l); err != nil || u.Name != "model" || u.Qualifiers.Map()["repository_url"] != "registry.example.test:5000/ml/model" || u.Qualifiers.Map()["tag"] != "" {
		t.Errorf("disk image purl %s reads back as %+v (%v)", l, u, err)
	}
	rels := map[string]bool{}
	for _, r := range doc.Relationships {
		rels[idName[r.RefA.ElementRefID]+" "+r.Relationship+" "+idName[r.RefB.ElementRefID]] = true
	}
	for _, want := range []string{"ecs-node CONTAINS registry.example.test/team/web:v1.2", "ecs-node.images.raw CONTAINS registry.example.test:5000/ml/model", " DESCRIBES ecs-node.images.raw"} {
		if !rels[want] {
			t.Errorf("relationship %q missing: %v", want, rels)
		}
	}
	if rels["ecs-node CONTAINS registry.example.test:5000/ml/model"] {
		t.Error("the image on the cache disk is listed in the node image")
	}
}
