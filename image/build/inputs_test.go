package build

import (
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/drover-os/drover/image/gomod"
	"github.com/drover-os/drover/image/recipe"
	"github.com/drover-os/drover/image/sources"
)

// provDeps renders m's provenance and returns its resolved dependencies.
func provDeps(t *testing.T, m *Manifest) []provDep {
	t.Helper()
	st, err := Provenance(m, []Subject{{Name: "ecs-node.raw", SHA256: strings.Repeat("0", 64)}})
	if err != nil {
		t.Fatal(err)
	}
	var doc struct {
		Predicate struct {
			BuildDefinition struct {
				ResolvedDependencies []provDep `json:"resolvedDependencies"`
			} `json:"buildDefinition"`
		} `json:"predicate"`
	}
	if err := json.Unmarshal(st, &doc); err != nil {
		t.Fatal(err)
	}
	if strings.Contains(string(st), "go.dev/dl") {
		t.Errorf("the provenance names a download site the toolchain did not come from:\n%s", st)
	}
	return doc.Predicate.BuildDefinition.ResolvedDependencies
}

type provDep struct {
	Name        string            `json:"name"`
	URI         string            `json:"uri"`
	Digest      map[string]string `json:"digest"`
	Annotations map[string]any    `json:"annotations"`
}

func findDep(deps []provDep, name string) *provDep {
	for i := range deps {
		if deps[i].Name == name {
			return &deps[i]
		}
	}
	return nil
}

// TestProvenanceNamesSourceToolchainAndInputs: the source commit (gitCommit,
// git+ URI) and the recipe tree (dirHash) with their state; the toolchain
// by where it came from and its go binary's sha256; every recipe file,
// keyring and copied file by sha256. Without a commit the tree's digest is
// what names the source, marked unknown.
func TestProvenanceNamesSourceToolchainAndInputs(t *testing.T) {
	const commit = "0123456789abcdef0123456789abcdef01234567"
	m := sbomManifest()
	m.RecipeSHA256, m.LockSHA256 = strings.Repeat("a", 64), strings.Repeat("b", 64)
	m.RecipeTree = &RecipeTree{Dir: "recipes", Repository: "git+https://" + DroverModule,
		Tree: gomod.Tree{Commit: commit, CommitFormat: "sha1", State: gomod.StateClean, DirHash: strings.Repeat("d", 64), Files: 7}}
	m.Toolchain = &gomod.Toolchain{Version: "go1.26.8", URI: "pkg:golang/golang.org/toolchain@v0.0.1-go1.26.8.linux-amd64",
		GoSHA256: strings.Repeat("9", 64), ZipSHA256: strings.Repeat("8", 64)}
	m.Inputs = []InputFile{{Name: "recipes/ecs-node.yaml", Role: "recipe", SHA256: strings.Repeat("1", 64)},
		{Name: "recipes/keys/debian-archive-trixie.asc", Role: "keyring", SHA256: strings.Repeat("2", 64)},
		{Name: "recipes/files/motd", Role: "file", SHA256: strings.Repeat("3", 64)}}
	deps := provDeps(t, m)

	src := findDep(deps, "source")
	if src == nil || src.URI != "git+https://github.com/drover-os/drover@"+commit || src.Digest["gitCommit"] != commit || src.Annotations["state"] != "clean" {
		t.Errorf("source: %+v", src)
	}
	if tree := findDep(deps, "recipe tree recipes"); tree == nil || tree.Digest["dirHash"] != strings.Repeat("d", 64) || tree.Annotations["state"] != "clean" {
		t.Errorf("recipe tree: %+v", tree)
	}
	tc := findDep(deps, "go toolchain")
	if tc == nil || tc.URI != m.Toolchain.URI || tc.Digest["sha256"] != m.Toolchain.GoSHA256 || tc.Annotations["moduleZipSHA256"] != m.Toolchain.ZipSHA256 {
		t.Errorf("go toolchain: %+v", tc)
	}
	for _, in := range m.Inputs {
		if d := findDep(deps, in.Name); d == nil || d.Digest["sha256"] != in.SHA256 || d.Annotations["role"] != in.Role {
			t.Errorf("input %s: %+v", in.Name, d)
		}
	}

	// A tree without .git: no commit to name, the files' digest, unknown.
	m.RecipeTree = &RecipeTree{Dir: "recipes", Tree: gomod.Tree{State: gomod.StateUnknown, DirHash: strings.Repeat("e", 64), Files: 7}}
	deps = provDeps(t, m)
	if src := findDep(deps, "source"); src != nil {
		t.Errorf("a tree without a commit names a source commit: %+v", src)
	}
	if tree := findDep(deps, "recipe tree recipes"); tree == nil || tree.Digest["dirHash"] != strings.Repeat("e", 64) || tree.Annotations["state"] != "unknown" {
		t.Errorf("recipe tree without a commit: %+v", tree)
	}
	// A toolchain the manifest has no facts for is named by version only.
	m.Toolchain = nil
	if tc := findDep(provDeps(t, m), "go toolchain go1.26.8"); tc == nil || tc.URI != "" || len(tc.Digest) != 0 {
		t.Errorf("toolchain without facts: %+v", tc)
	}
}

// TestRecipeInputs: the recipe and its base, the keyrings (committed ones
// by their repository path, the recipe's by its path, --keyring by the
// flag) are named below the recipe directory's parent, once each.
func TestRecipeInputs(t *testing.T) {
	top := t.TempDir()
	dir := filepath.Join(top, "recipes")
	must := func(err error) {
		t.Helper()
		if err != nil {
			t.Fatal(err)
		}
	}
	must(os.MkdirAll(dir, 0o755))
	base := "name: base\narch: amd64\ndebian:\n  suite: trixie\n  components: [main]\nkernel: linux-image-cloud-amd64\npackages: [base-files]\n"
	must(os.WriteFile(filepath.Join(dir, "base.yaml"), []byte(base), 0o644))
	must(os.WriteFile(filepath.Join(dir, "node.yaml"), []byte("extends: base.yaml\nname: node\n"), 0o644))
	r, err := recipe.Load(filepath.Join(dir, "node.yaml"))
	must(err)
	keyrings := []*sources.TrustRoot{
		{Source: "repo:recipes/keys/debian-archive-trixie.asc", SHA256: strings.Repeat("1", 64)},
		{Source: "repo:recipes/keys/debian-archive-trixie.asc", SHA256: strings.Repeat("1", 64)}, // trixie-updates: the same keys
		{Source: "recipe:keys/private.asc", Path: filepath.Join(dir, "keys", "private.asc"), SHA256: strings.Repeat("2", 64)},
		{Source: "override:sha256:" + strings.Repeat("3", 64), Path: "/home/me/mirror.asc", SHA256: strings.Repeat("3", 64)},
	}
	got := recipeInputs(r, keyrings)
	var names []string
	for _, in := range got {
		names = append(names, in.Role+" "+in.Name)
	}
	want := "recipe recipes/node.yaml,recipe recipes/base.yaml,keyring recipes/keys/debian-archive-trixie.asc,keyring recipes/keys/private.asc,keyring --keyring"
	if strings.Join(names, ",") != want {
		t.Errorf("inputs %q\nwant %q", strings.Join(names, ","), want)
	}
	if got[0].SHA256 != sha([]byte("extends: base.yaml\nname: node\n")) {
		t.Errorf("recipe sha256 %s is not the file's", got[0].SHA256)
	}
}
