package main

import (
	"runtime/debug"
	"testing"
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
	}{
		{"stamped wins", "v1.4.0", info("v1.3.0", "vcs.revision", rev), "v1.4.0"},
		{"go install @version", "dev", info("v1.3.0"), "v1.3.0"},
		{"tagged checkout", "dev", info("v1.3.0+dirty", "vcs.revision", rev, "vcs.modified", "true"), "v1.3.0+dirty"},
		{"checkout", "dev", info("v0.0.0-20260102030405-0123456789ab", "vcs.revision", rev, "vcs.modified", "false"), rev},
		{"modified checkout", "dev", info("v0.0.0-20260102030405-0123456789ab+dirty", "vcs.revision", rev, "vcs.modified", "true"), rev + "+dirty"},
		{"empty stamp", "", info("(devel)", "vcs.revision", rev), rev},
		{"pseudo-version only", "dev", info("v1.3.1-0.20260102030405-0123456789ab"), "v1.3.1-0.20260102030405-0123456789ab"},
		{"-buildvcs=false", "dev", info("(devel)"), "dev"},
		{"no build info", "dev", nil, "dev"},
	} {
		if got := builderVersion(tc.stamped, tc.bi); got != tc.want {
			t.Errorf("%s: builderVersion = %q, want %q", tc.name, got, tc.want)
		}
	}
}
