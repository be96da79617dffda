//go:build e2e

package e2e

import (
	"bytes"
	"encoding/json"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"testing"
	"time"

	spdxjson "github.com/spdx/tools-golang/json"
	"github.com/spdx/tools-golang/spdx"
	"github.com/spdx/tools-golang/spdx/v2/common"
	"github.com/spdx/tools-golang/spdxlib"

	"github.com/drover-os/drover/agent/nodeconfig"
	"github.com/drover-os/drover/image/build"
	"github.com/drover-os/drover/image/cache"
	"github.com/drover-os/drover/image/recipe"
	"github.com/drover-os/drover/image/sbomschema"
)

// TestEcsNodeBuildReproducible builds the default recipe twice into
// separate output directories, the way the README does (drover-agent and
// drover-init built from this checkout), and requires bit-identical
// outputs; then it reads the SBOM and the provenance for what they must say.
// The second build runs with GOTOOLCHAIN=go1.27.3 exported, as a caller's
// environment might: the lock's toolchain must win, so the bytes cannot
// change. The two builds share the download cache (and so the cached Go
// components): what is checked is that the same inputs give the same image.
func TestEcsNodeBuildReproducible(t *testing.T) {
	work, err := os.MkdirTemp("", "drover-e2e-ecs-node-build-")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { os.RemoveAll(work) })
	recipe := filepath.Join(repo, "recipes", "ecs-node.yaml")
	var outs [2]string
	for i, env := range [][]string{nil, {"GOTOOLCHAIN=go1.27.3"}} {
		if i == 1 {
			// The first build keeps drover's own binaries in the cache
			// by their inputs (gomod.BuildLocal); the caller's
			// GOTOOLCHAIN is not one of them, so the second would take
			// them from there. Forgetting them makes it run go build
			// under that GOTOOLCHAIN: what this test checks.
			forgetOwnBinaries(t)
		}
		outs[i] = filepath.Join(work, "out"+string(rune('a'+i)))
		start := time.Now()
		runEnv(t, env, bin("drover"), "build", recipe, "-o", outs[i])
		t.Logf("build %d (%v): %s", i+1, env, time.Since(start).Round(time.Second))
	}
	for _, f := range []string{"ecs-node.raw", "ecs-node.qcow2", "ecs-node.vhd", "ecs-node.manifest.json", "ecs-node.spdx.json",
		"ecs-node.cdx.json", "ecs-node.provenance.json"} {
		a, b := fileSHA(t, filepath.Join(outs[0], f)), fileSHA(t, filepath.Join(outs[1], f))
		if a != b {
			t.Errorf("%s differs between two builds: %s vs %s", f, a, b)
		} else {
			t.Logf("%-24s identical, sha256 %s", f, a)
		}
	}
	out := outs[0]
	mf := readManifest(t, filepath.Join(out, "ecs-node.manifest.json"))
	checkManifestImages(t, out, mf)
	// drover's own binaries: built from this checkout with the lock's
	// toolchain, not the caller's.
	lockText := string(readFile(t, recipe+".lock"))
	// drover-agent, drover-init and, as ecs-node.yaml asks
	// (credentialProviders: [acr]), the ACR credential provider.
	var paths []string
	for _, o := range mf.Own {
		paths = append(paths, o.Path)
	}
	if want := []string{"/usr/bin/drover-agent", "/usr/lib/drover/drover-init", nodeconfig.ACRProviderPath}; !slices.Equal(paths, want) {
		t.Errorf("manifest lists the drover binaries %q, want %q", paths, want)
	}
	for _, o := range mf.Own {
		if o.Built != "source" || o.Source == nil {
			t.Errorf("manifest: %s built %q (source %v), want built from the checkout", o.Path, o.Built, o.Source)
		}
		if !strings.Contains(lockText, "\ntoolchain "+o.GoVersion+"\n") {
			t.Errorf("manifest: %s built with %q, not the lock's toolchain", o.Path, o.GoVersion)
		}
	}
	checkSBOMSchemas(t, filepath.Join(out, "ecs-node.spdx.json"), filepath.Join(out, "ecs-node.cdx.json"))
	checkSPDX(t, filepath.Join(out, "ecs-node.spdx.json"), mf)
	checkSPDXLibrary(t, filepath.Join(out, "ecs-node.spdx.json"), map[string]string{
		"kubelet":      "github.com/google/cadvisor/lib",
		"drover-agent": "github.com/coreos/ignition/v2",
	})
	checkProvenance(t, filepath.Join(out, "ecs-node.provenance.json"), out, mf)
	t.Run("independent checks", func(t *testing.T) {
		root := independentChecks(t, out, filepath.Join(out, "ecs-node.raw"), "ecs-node")
		checkInitrdInit(t, filepath.Join(out, "ecs-node.raw"), mf, erofsLs(t, root, mf.RootFS.Compression))
		checkCNIShipped(t, root, recipe, mf)
	})
}

// checkCNIShipped requires the root file system itself (read by
// dump.erofs, not from drover's manifest) to hold in /usr/lib/cni exactly
// the CNI plugins the recipe chooses, and the manifest to say so.
func checkCNIShipped(t *testing.T, rootImg, recipePath string, mf *build.Manifest) {
	t.Helper()
	r, err := recipe.Load(recipePath)
	if err != nil {
		t.Fatal(err)
	}
	want, _ := r.CNIPlugins()
	want = slices.Sorted(slices.Values(want))
	got := erofsLs(t, rootImg, mf.RootFS.Compression)(recipe.CNIDir)
	slices.Sort(got)
	if !slices.Equal(got, want) {
		t.Errorf("%s in the root file system holds %q, the recipe chooses %q", recipe.CNIDir, got, want)
	}
	var shipped []string
	if mf.CNI != nil {
		for _, p := range mf.CNI.Shipped {
			shipped = append(shipped, p.Name)
		}
	}
	if !slices.Equal(shipped, want) {
		t.Errorf("manifest: cni shipped %q, the recipe chooses %q", shipped, want)
	}
	t.Logf("%s: %s", recipe.CNIDir, strings.Join(got, " "))
}

// checkManifestImages requires the manifest to list every image file
// with the digest of the file on disk.
func checkManifestImages(t *testing.T, out string, mf *build.Manifest) {
	t.Helper()
	formats := map[string]bool{}
	for _, im := range mf.Images {
		formats[im.Format] = true
		if got := fileSHA(t, filepath.Join(out, im.File)); got != im.SHA256 {
			t.Errorf("manifest: %s sha256 %s, the file's is %s", im.File, im.SHA256, got)
		}
	}
	for _, f := range []string{"raw", "qcow2", "vhd"} {
		if !formats[f] {
			t.Errorf("manifest: no %s image listed in images", f)
		}
	}
}

// checkSBOMSchemas requires the build's SPDX and CycloneDX documents to
// validate against the official schemas: the unit tests check documents
// written from a hand-made manifest, and a real build's packages, licenses
// and versions are where a scanner would find what they do not have.
func checkSBOMSchemas(t *testing.T, spdxPath, cdxPath string) {
	t.Helper()
	if err := sbomschema.SPDX(readFile(t, spdxPath)); err != nil {
		t.Errorf("%s: %v", spdxPath, err)
	}
	if err := sbomschema.CycloneDX(readFile(t, cdxPath)); err != nil {
		t.Errorf("%s: %v", cdxPath, err)
	}
}

// spdxDoc is the part of an SPDX 2.3 JSON document the test reads.
type spdxDoc struct {
	SPDXVersion       string `json:"spdxVersion"`
	DataLicense       string `json:"dataLicense"`
	SPDXID            string `json:"SPDXID"`
	DocumentNamespace string `json:"documentNamespace"`
	Packages          []struct {
		SPDXID    string `json:"SPDXID"`
		Name      string `json:"name"`
		Version   string `json:"versionInfo"`
		Checksums []struct {
			Algorithm string `json:"algorithm"`
			Value     string `json:"checksumValue"`
		} `json:"checksums"`
	} `json:"packages"`
	Relationships []struct {
		A    string `json:"spdxElementId"`
		Type string `json:"relationshipType"`
		B    string `json:"relatedSpdxElement"`
	} `json:"relationships"`
}

var spdxID = regexp.MustCompile(`^SPDXRef-[A-Za-z0-9.-]+$`)

// checkSPDX requires an SPDX 2.3 document that names every Debian package
// of the manifest with its version (and sha256 where it gives one), every
// Go component by name or module with its version, unique well-formed
// SPDXIDs, relationships between known elements and a DESCRIBES from the
// document.
func checkSPDX(t *testing.T, p string, mf *build.Manifest) {
	t.Helper()
	var doc spdxDoc
	if err := json.Unmarshal(readFile(t, p), &doc); err != nil {
		t.Fatalf("%s: %v", p, err)
	}
	if doc.SPDXVersion != "SPDX-2.3" || doc.DataLicense != "CC0-1.0" || doc.SPDXID != "SPDXRef-DOCUMENT" || doc.DocumentNamespace == "" {
		t.Errorf("%s: header spdxVersion %q dataLicense %q SPDXID %q documentNamespace %q, want SPDX-2.3, CC0-1.0, SPDXRef-DOCUMENT and a namespace",
			p, doc.SPDXVersion, doc.DataLicense, doc.SPDXID, doc.DocumentNamespace)
	}
	ids := map[string]bool{doc.SPDXID: true}
	byName := map[string][]int{}
	for i, pk := range doc.Packages {
		if !spdxID.MatchString(pk.SPDXID) || ids[pk.SPDXID] {
			t.Errorf("%s: package %q has a malformed or repeated SPDXID %q", p, pk.Name, pk.SPDXID)
		}
		ids[pk.SPDXID] = true
		byName[pk.Name] = append(byName[pk.Name], i)
	}
	for _, want := range mf.Packages {
		found := false
		for _, i := range byName[want.Name] {
			pk := doc.Packages[i]
			if pk.Version != want.Version {
				continue
			}
			found = true
			for _, c := range pk.Checksums {
				if c.Algorithm == "SHA256" && c.Value != want.SHA256 {
					t.Errorf("%s: package %s %s has sha256 %s, the manifest %s", p, want.Name, want.Version, c.Value, want.SHA256)
				}
			}
		}
		if !found {
			t.Errorf("%s: Debian package %s %s of the manifest is missing", p, want.Name, want.Version)
		}
	}
	if len(mf.Go) == 0 {
		t.Errorf("manifest lists no Go components: ecs-node builds kubelet")
	}
	for _, g := range mf.Go {
		found := false
		for _, name := range []string{g.Name, g.Module} {
			for _, i := range byName[name] {
				found = found || doc.Packages[i].Version == g.Version
			}
		}
		if !found {
			t.Errorf("%s: Go component %s (%s %s) of the manifest is missing", p, g.Name, g.Module, g.Version)
		}
	}
	describes := false
	for _, r := range doc.Relationships {
		if !ids[r.A] || !ids[r.B] {
			t.Errorf("%s: relationship %s %s %s names an unknown element", p, r.A, r.Type, r.B)
		}
		describes = describes || r.A == doc.SPDXID && r.Type == "DESCRIBES"
	}
	if !describes {
		t.Errorf("%s: no DESCRIBES relationship from %s", p, doc.SPDXID)
	}
	t.Logf("%s: %d packages (manifest: %d Debian, %d Go), %d relationships", filepath.Base(p), len(doc.Packages),
		len(mf.Packages), len(mf.Go), len(doc.Relationships))
}

// checkProvenance requires an in-toto v1 Statement whose subjects are
// exactly the image files, each with the sha256 of the file on disk.
func checkProvenance(t *testing.T, p, out string, mf *build.Manifest) {
	t.Helper()
	var st struct {
		Type          string `json:"_type"`
		PredicateType string `json:"predicateType"`
		Subject       []struct {
			Name   string `json:"name"`
			Digest struct {
				SHA256 string `json:"sha256"`
			} `json:"digest"`
		} `json:"subject"`
		Predicate json.RawMessage `json:"predicate"`
	}
	if err := json.Unmarshal(readFile(t, p), &st); err != nil {
		t.Fatalf("%s: %v", p, err)
	}
	if st.Type != "https://in-toto.io/Statement/v1" || st.PredicateType == "" || len(st.Predicate) == 0 || string(st.Predicate) == "null" {
		t.Errorf("%s: _type %q predicateType %q: want an in-toto v1 Statement with a predicate", p, st.Type, st.PredicateType)
	}
	subjects := map[string]string{}
	for _, s := range st.Subject {
		if _, dup := subjects[s.Name]; dup {
			t.Errorf("%s: subject %s listed twice", p, s.Name)
		}
		subjects[s.Name] = s.Digest.SHA256
		if strings.Contains(s.Name, "/") {
			t.Errorf("%s: subject %q is not a file name in the output directory", p, s.Name)
			continue
		}
		if got := fileSHA(t, filepath.Join(out, s.Name)); got != s.Digest.SHA256 {
			t.Errorf("%s: subject %s has sha256 %s, the file's is %s", p, s.Name, s.Digest.SHA256, got)
		}
	}
	for _, im := range mf.Images {
		if _, ok := subjects[im.File]; !ok {
			t.Errorf("%s: image %s is not a subject", p, im.File)
		}
	}
	t.Logf("%s: %s, predicate %s, %d subjects", filepath.Base(p), st.Type, st.PredicateType, len(st.Subject))
}

// checkSPDXLibrary reads the SBOM with the SPDX library, runs its validator,
// and requires each binary to DEPENDS_ON the named module, listed with a
// version (the binary's build list, not only the binary).
func checkSPDXLibrary(t *testing.T, p string, edges map[string]string) {
	t.Helper()
	doc, err := spdxjson.Read(bytes.NewReader(readFile(t, p)))
	if err != nil {
		t.Fatalf("%s: the SPDX library cannot read it: %v", p, err)
	}
	if err := spdxlib.ValidateDocument(doc); err != nil {
		t.Fatalf("%s: the SPDX library's validator refuses it: %v", p, err)
	}
	byID := map[common.ElementID]*spdx.Package{}
	for _, pk := range doc.Packages {
		byID[pk.PackageSPDXIdentifier] = pk
	}
	for binName, module := range edges {
		found := ""
		for _, r := range doc.Relationships {
			a, b := byID[r.RefA.ElementRefID], byID[r.RefB.ElementRefID]
			if r.Relationship == "DEPENDS_ON" && a != nil && b != nil && a.PackageName == binName && b.PackageName == module && b.PackageVersion != "" {
				found = b.PackageVersion
			}
		}
		if found == "" {
			t.Errorf("%s: no %s DEPENDS_ON %s with a version", p, binName, module)
		} else {
			t.Logf("SBOM: %s DEPENDS_ON %s %s", binName, module, found)
		}
	}
}

// forgetOwnBinaries unlinks the keys of drover's own binaries ("gomod
// local ...") from the default drover cache, so the next build builds
// them again. The blobs stay; a key file holds the blob's sha256, then the
// key (image/cache).
func forgetOwnBinaries(t *testing.T) {
	t.Helper()
	dir, err := cache.DefaultDir(os.Getenv)
	if err != nil {
		t.Fatal(err)
	}
	keys, err := filepath.Glob(filepath.Join(dir, "keys", "*"))
	if err != nil {
		t.Fatal(err)
	}
	n := 0
	for _, k := range keys {
		data, err := os.ReadFile(k)
		if err != nil {
			continue
		}
		if _, key, _ := strings.Cut(string(data), "\n"); strings.HasPrefix(key, "gomod local ") {
			if err := os.Remove(k); err != nil {
				t.Fatal(err)
			}
			n++
		}
	}
	if n == 0 {
		t.Fatalf("no own-binary keys in %s after a build: the cache layout changed, and the second build would not build them", dir)
	}
	t.Logf("forgot %d cached own binaries in %s", n, dir)
}
