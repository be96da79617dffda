package main

import (
	"runtime/debug"
	"testing"

	"github.com/drover-os/drover/image/gomod"
)

func TestBuilderVersion(t *testing.T) {
	info := func(mod string, settings ...string) *debug.BuildInfo {
		bi := &debug.BuildInfo{Main: debug.Module{Path: "github.com/drover-os/drover", Version: mod}}
		for i := 0; i+1 < len(settings); i += 2 {
			bi.Settings = append(bi.Settings, debug.BuildSetting{Key: settings[i], Value: settings[i+1]})
		}
		return bi
	}
	const rev = "0123456789abcdef0123456789abcdef01234567"
	for _, tc := range []struct {
		name, stamped string
		bi            *debug.BuildInfo
		want          string
		state         gomod.SourceState
	}{
		{"stamped wins", "v1.4.0", info("v1.3.0", "vcs.revision", rev), "v1.4.0", gomod.StateClean},
		{"stamped by make build", rev, info("(devel)"), rev, gomod.StateClean},
		{"stamped dirty", rev + "+dirty", info("(devel)"), rev + "+dirty", gomod.StateDirty},
		{"stamped clean, built from a modified checkout", rev, info("(devel)", "vcs.revision", rev, "vcs.modified", "true"), rev, gomod.StateDirty},
		{"go install @version", "dev", info("v1.3.0"), "v1.3.0", gomod.StateClean},
		{"tagged checkout", "dev", info("v1.3.0+dirty", "vcs.revision", rev, "vcs.modified", "true"), "v1.3.0+dirty", gomod.StateDirty},
		{"checkout", "dev", info("v0.0.0-20260102030405-0123456789ab", "vcs.revision", rev, "vcs.modified", "false"), rev, gomod.StateClean},
		{"modified checkout", "dev", info("v0.0.0-20260102030405-0123456789ab+dirty", "vcs.revision", rev, "vcs.modified", "true"), rev + "+dirty", gomod.StateDirty},
		{"checkout without vcs.modified", "dev", info("(devel)", "vcs.revision", rev), rev, gomod.StateUnknown},
		{"module version, revision without vcs.modified", "dev", info("v1.3.0", "vcs.revision", rev), "v1.3.0", gomod.StateUnknown},
		{"empty stamp", "", info("(devel)", "vcs.revision", rev, "vcs.modified", "false"), rev, gomod.StateClean},
		{"pseudo-version only", "dev", info("v1.3.1-0.20260102030405-0123456789ab"), "v1.3.1-0.20260102030405-0123456789ab", gomod.StateClean},
		{"-buildvcs=false", "dev", info("(devel)"), "dev", gomod.StateUnknown},
		{"empty stamp, -buildvcs=false", "", info("(devel)"), "dev", gomod.StateUnknown},
		{"no build info", "dev", nil, "dev", gomod.StateUnknown},
	} {
		if got := builderVersion(tc.stamped, tc.bi); got != tc.want {
			t.Errorf("%s: builderVersion = %q, want %q", tc.name, got, tc.want)
		}
		if got := builderState(tc.stamped, tc.bi); got != tc.state {
			t.Errorf("%s: builderState = %q, want %q", tc.name, got, tc.state)
		}
	}
}
