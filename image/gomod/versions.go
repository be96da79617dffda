package gomod

import (
	"context"
	"encoding/json"
	"fmt"
	"strings"

	"golang.org/x/mod/semver"
)

// ModuleVersions lists the released versions of module the module proxy
// knows (`go list -m -versions`, as configured for the go command: GOPROXY,
// GONOSUMDB, …), sorted by semver.
func ModuleVersions(ctx context.Context, env Env, module string) ([]string, error) {
	if !pathRE.MatchString(module) {
		return nil, fmt.Errorf("listing versions of %q: not a module path", module)
	}
	out, err := inEmptyModule(ctx, env, "list", "-m", "-versions", "-json=Path,Versions", module)
	if err != nil {
		return nil, fmt.Errorf("listing versions of %s: %w", module, err)
	}
	var m struct{ Versions []string }
	if err := json.Unmarshal(out, &m); err != nil {
		return nil, fmt.Errorf("listing versions of %s: %w", module, err)
	}
	semver.Sort(m.Versions)
	return m.Versions, nil
}

// PatchUpdates are the releases of versions newer than current within
// current's major.minor (v1.37.3 for v1.37.2), oldest first; pre-releases
// do not count.
func PatchUpdates(current string, versions []string) []string {
	var out []string
	for _, v := range versions {
		if semver.Prerelease(v) != "" || semver.Build(v) != "" || semver.MajorMinor(v) != semver.MajorMinor(current) {
			continue
		}
		if semver.Compare(v, current) > 0 && !strings.Contains(v, "+incompatible") {
			out = append(out, v)
		}
	}
	semver.Sort(out)
	return out
}
