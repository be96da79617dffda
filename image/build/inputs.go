package build

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"path/filepath"
	"slices"
	"strings"

	"github.com/drover-os/drover/image/gomod"
	"github.com/drover-os/drover/image/recipe"
	"github.com/drover-os/drover/image/sources"
)

// InputFile is one file of the recipe's tree (or the build host, for
// --keyring) that the build read: the recipe and every base it extends,
// each keyring a suite's signature was checked against, each file the
// recipe copies into the image. The provenance lists each with its sha256.
type InputFile struct {
	// Name is the path below the recipe directory's parent
	// (recipes/ecs-node.yaml, recipes/keys/debian-archive-trixie.asc: the
	// same on every machine), or "--keyring" for a keyring given on the
	// command line.
	Name   string `json:"name"`
	Role   string `json:"role"` // recipe, keyring or file
	SHA256 string `json:"sha256"`
}

// RecipeTree is the directory the recipe is in as the build found it: the
// commit of the repository it is in (the source the provenance names),
// whether its files are that commit's, and a digest of its files as read,
// which names the tree when there is no commit (a tarball, a copy).
type RecipeTree struct {
	Dir string `json:"dir"` // the directory's name, e.g. recipes
	// Repository is the git URI of the source, from the Go module the
	// recipe directory is in (git+https://github.com/drover-os/drover);
	// empty when it is in none.
	Repository string `json:"repository,omitempty"`
	gomod.Tree
}

// inputName names path (below the recipe's directory, or anywhere) as the
// manifest does: relative to the recipe directory's parent, so that the
// name does not depend on where the checkout is.
func inputName(r *recipe.Recipe, path string) string {
	dir, err := filepath.Abs(r.Dir)
	abs, err2 := filepath.Abs(path)
	if err != nil || err2 != nil {
		return filepath.ToSlash(path)
	}
	rel, err := filepath.Rel(filepath.Dir(dir), abs)
	if err != nil {
		return filepath.ToSlash(path)
	}
	return filepath.ToSlash(rel)
}

// recipeInputs lists the recipe's files and the keyrings the fetch checked
// the suites' signatures with, once each.
func recipeInputs(r *recipe.Recipe, keyrings []*sources.TrustRoot) []InputFile {
	var in []InputFile
	for _, s := range r.Sources {
		sum := sha256.Sum256(s.Raw)
		in = append(in, InputFile{Name: inputName(r, s.Path), Role: "recipe", SHA256: hex.EncodeToString(sum[:])})
	}
	if len(r.Sources) == 0 && r.Raw != nil {
		sum := sha256.Sum256(r.Raw)
		in = append(in, InputFile{Name: inputName(r, r.Path), Role: "recipe", SHA256: hex.EncodeToString(sum[:])})
	}
	for _, k := range keyrings {
		name := ""
		switch {
		case strings.HasPrefix(k.Source, "repo:"):
			name = strings.TrimPrefix(k.Source, "repo:") // compiled into drover from recipes/keys
		case strings.HasPrefix(k.Source, "override:"):
			name = "--keyring"
		default:
			name = inputName(r, k.Path)
		}
		in = addInput(in, InputFile{Name: name, Role: "keyring", SHA256: k.SHA256})
	}
	return in
}

// addInput appends f unless the same file is listed already.
func addInput(in []InputFile, f InputFile) []InputFile {
	if slices.Contains(in, f) {
		return in
	}
	return append(in, f)
}

// describeRecipeTree describes the recipe's directory; Repository is the
// module the checkout of drover's own binaries is when the directory is in
// it. A dirty tree's differences are logged.
func (b *builder) describeRecipeTree(ctx context.Context) error {
	t, diff, err := gomod.DescribeTree(ctx, b.p.Recipe.Dir)
	if err != nil {
		return err
	}
	for _, d := range diff {
		b.logf("build: recipe tree is dirty: %s", d)
	}
	dir, _ := filepath.Abs(b.p.Recipe.Dir)
	rt := &RecipeTree{Dir: filepath.Base(dir), Tree: *t}
	if src := b.o.Source; src != nil {
		if top, err := filepath.Abs(src.Dir); err == nil {
			if rel, err := filepath.Rel(top, dir); err == nil && rel != ".." && !strings.HasPrefix(rel, ".."+string(filepath.Separator)) {
				rt.Repository = "git+https://" + src.Module
			}
		}
	}
	b.man.RecipeTree = rt
	return nil
}

// recordToolchain describes the toolchain env selects, once: every Go
// binary of the image is built with the lock's.
func (b *builder) recordToolchain(ctx context.Context, env gomod.Env) error {
	if b.man.Toolchain != nil {
		return nil
	}
	t, err := gomod.ToolchainFacts(ctx, env)
	if err != nil {
		return err
	}
	b.man.Toolchain = t
	return nil
}
