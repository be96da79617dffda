package build

import (
	"fmt"
	"strings"

	"github.com/drover-os/drover/image/gomod"
)

// releaseFix is what to do when a build is not fit for a release.
const releaseFix = "build drover from a clean git checkout with `make build` (it stamps the commit) and run bin/drover build --release from that checkout"

// CheckReleaseBuilder refuses, for drover build --release, a builder whose
// version is not known ("dev", empty) or whose source is not known to be
// clean: a release's manifest, SBOMs and signed provenance name the
// builder, and a name nothing backs is not a fact to sign.
func CheckReleaseBuilder(version string, state gomod.SourceState) error {
	v := strings.TrimPrefix(version, "drover ")
	switch {
	case v == "" || v == "dev":
		return fmt.Errorf("--release: the builder's version is %q (no stamp, no VCS revision in its build info, source state %s): %s", v, state.Known(), releaseFix)
	case state.Known() != gomod.StateClean:
		return fmt.Errorf("--release: the builder %s was compiled from a source whose state is %s, not clean: %s", v, state.Known(), releaseFix)
	}
	return nil
}

// checkRelease refuses a release whose builder, recipe directory or any
// of drover's own binaries (drover-agent, drover-init, the sandbox image's pause) is not
// built from a known, clean commit: an override or a tree without a commit
// is unknown, a modified checkout is dirty.
func (m *Manifest) checkRelease() error {
	if err := CheckReleaseBuilder(m.Builder, m.BuilderSource); err != nil {
		return err
	}
	own := append([]OwnFile(nil), m.Own...)
	if m.Sandbox != nil {
		own = append(own, m.Sandbox.Pause...)
	}
	for _, o := range own {
		switch {
		case o.Built == "override":
			return fmt.Errorf("--release: %s is a given binary (%s), not built from the checkout: its source is unknown; drop --agent/--init and %s", o.Path, o.From, releaseFix)
		case o.Source == nil:
			return fmt.Errorf("--release: %s records no source: %s", o.Path, releaseFix)
		case o.Source.State.Known() != gomod.StateClean:
			return fmt.Errorf("--release: %s is compiled from %s, source state %s (%s): %s", o.Path, o.Source, o.Source.State.Known(), stateWhy(o.Source.State.Known()), releaseFix)
		}
	}
	if t := m.RecipeTree; t != nil && t.State.Known() != gomod.StateClean {
		return fmt.Errorf("--release: the recipe directory %s is %s (commit %q: %s): %s", t.Dir, t.State.Known(), t.Commit, stateWhy(t.State.Known()), releaseFix)
	}
	return nil
}

func stateWhy(s gomod.SourceState) string {
	if s == gomod.StateDirty {
		return "a file it is compiled from is not the commit's; the build log names it"
	}
	return "no git commit to compare its files with: a tree without .git, or git missing or failing"
}
