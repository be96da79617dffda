package build

import (
	"context"
	"strings"
	"testing"

	"github.com/drover-os/drover/image/gomod"
)

// TestCheckRelease: --release takes only a builder with a version and a
// clean source, and own binaries each compiled from a clean commit; every
// refusal names what is wrong and says to build from a clean checkout
// with make build.
func TestCheckRelease(t *testing.T) {
	const rev = "0123456789abcdef0123456789abcdef01234567"
	src := func(commit string, state gomod.SourceState) OwnSource {
		return OwnSource{Built: "source", Source: &gomod.Source{Module: DroverModule, Commit: commit, State: state}}
	}
	own := func(how OwnSource) []OwnFile {
		return []OwnFile{{Path: "/usr/bin/drover-agent", OwnSource: how}, {Path: "/usr/lib/drover/drover-init", OwnSource: src(rev, gomod.StateClean)}}
	}
	for _, tc := range []struct {
		name    string
		m       Manifest
		wantErr string // "" passes
	}{
		{"clean", Manifest{Builder: "drover " + rev, BuilderSource: gomod.StateClean, Own: own(src(rev, gomod.StateClean))}, ""},
		{"dev builder", Manifest{Builder: "drover dev", BuilderSource: gomod.StateUnknown, Own: own(src(rev, gomod.StateClean))}, `builder's version is "dev"`},
		{"empty builder", Manifest{Builder: "drover ", BuilderSource: gomod.StateClean, Own: own(src(rev, gomod.StateClean))}, `builder's version is ""`},
		{"dirty builder", Manifest{Builder: "drover " + rev + "+dirty", BuilderSource: gomod.StateDirty, Own: own(src(rev, gomod.StateClean))}, "state is dirty"},
		{"builder state not recorded", Manifest{Builder: "drover " + rev, Own: own(src(rev, gomod.StateClean))}, "state is unknown"},
		{"tree without .git", Manifest{Builder: "drover " + rev, BuilderSource: gomod.StateClean, Own: own(src("", gomod.StateUnknown))}, "drover-agent is compiled from github.com/drover-os/drover@unknown-commit, source state unknown"},
		{"dirty checkout", Manifest{Builder: "drover " + rev, BuilderSource: gomod.StateClean, Own: own(src(rev, gomod.StateDirty))}, "source state dirty"},
		{"state not recorded", Manifest{Builder: "drover " + rev, BuilderSource: gomod.StateClean, Own: own(src(rev, ""))}, "source state unknown"},
		{"override", Manifest{Builder: "drover " + rev, BuilderSource: gomod.StateClean, Own: own(OwnSource{Built: "override", From: "/tmp/agent"})}, "given binary (/tmp/agent)"},
		{"recipe tree without .git", Manifest{Builder: "drover " + rev, BuilderSource: gomod.StateClean, Own: own(src(rev, gomod.StateClean)),
			RecipeTree: &RecipeTree{Dir: "recipes", Tree: gomod.Tree{State: gomod.StateUnknown}}}, "the recipe directory recipes is unknown"},
		{"dirty recipe tree", Manifest{Builder: "drover " + rev, BuilderSource: gomod.StateClean, Own: own(src(rev, gomod.StateClean)),
			RecipeTree: &RecipeTree{Dir: "recipes", Tree: gomod.Tree{Commit: rev, State: gomod.StateDirty}}}, "the recipe directory recipes is dirty"},
		{"clean recipe tree", Manifest{Builder: "drover " + rev, BuilderSource: gomod.StateClean, Own: own(src(rev, gomod.StateClean)),
			RecipeTree: &RecipeTree{Dir: "recipes", Tree: gomod.Tree{Commit: rev, State: gomod.StateClean}}}, ""},
		{"dirty pause", Manifest{Builder: "drover " + rev, BuilderSource: gomod.StateClean, Own: own(src(rev, gomod.StateClean)),
			Sandbox: &SandboxImage{Pause: []OwnFile{{Path: "pause linux/arm64", OwnSource: src(rev, gomod.StateDirty)}}}}, "pause linux/arm64 is compiled from"},
	} {
		err := tc.m.checkRelease()
		switch {
		case tc.wantErr == "" && err != nil:
			t.Errorf("%s: %v", tc.name, err)
		case tc.wantErr != "" && err == nil:
			t.Errorf("%s: accepted for a release", tc.name)
		case tc.wantErr != "" && (!strings.Contains(err.Error(), tc.wantErr) || !strings.Contains(err.Error(), "clean git checkout with `make build`")):
			t.Errorf("%s: %v\nwant it to say %q and what to do", tc.name, err, tc.wantErr)
		}
	}
}

// TestReleaseStopsBeforeOutputs: with Release, a build whose own binaries
// are given (source unknown) stops at the release check, after the
// binaries are known and before anything is written; without it the same
// build goes on (and fails later, at the fixture's missing kernel).
func TestReleaseStopsBeforeOutputs(t *testing.T) {
	const rev = "0123456789abcdef0123456789abcdef01234567"
	p, o, out := kernelless(t)
	o.Version, o.BuilderSource, o.Release = rev, gomod.StateClean, true
	_, err := Build(context.Background(), p, o)
	if err == nil || !strings.HasPrefix(err.Error(), "release check: --release: /usr/bin/drover-agent is a given binary") {
		t.Errorf("release with --agent: %v", err)
	}
	assertNoOutputs(t, out)

	p, o, out = kernelless(t)
	o.Version, o.BuilderSource = rev, gomod.StateClean
	if _, err := Build(context.Background(), p, o); err == nil || !strings.HasPrefix(err.Error(), "finalize: ") {
		t.Errorf("without --release: %v, want the fixture's finalize error", err)
	}
	assertNoOutputs(t, out)
}
