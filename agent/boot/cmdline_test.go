package boot

import (
	"strings"
	"testing"
)

func TestParseCmdline(t *testing.T) {
	cases := []struct {
		in   string
		want Cmdline
	}{
		{"", Cmdline{}},
		{"BOOT_IMAGE=/vmlinuz console=ttyS0 drover.roothash=ABCD quiet\n", Cmdline{RootHash: "abcd", HasRootHash: true}},
		{"drover.debug drover.break=var-format", Cmdline{Debug: true, Break: "var-format"}},
		{"drover.debug=0 drover.debug=1", Cmdline{Debug: true}},
		{"drover.debug=1 drover.debug=off", Cmdline{}},
		{`foo="a b drover.debug" drover.roothash=1 drover.roothash=2`, Cmdline{RootHash: "2", HasRootHash: true}},
		{`"drover.break=modules"  -- drover.debug`, Cmdline{Break: "modules", Debug: true}},
		{"xdrover.debug drover.debugger drover.roothash=", Cmdline{HasRootHash: true}},
	}
	for _, c := range cases {
		if got := ParseCmdline(c.in); got != c.want {
			t.Errorf("ParseCmdline(%q) = %+v, want %+v", c.in, got, c.want)
		}
	}
}

func TestCheckCmdline(t *testing.T) {
	c := testConfig(t)
	steps := StepNames(Steps())
	ok := Cmdline{RootHash: c.RootHash, HasRootHash: true}
	if err := CheckCmdline(ok, c, steps); err != nil {
		t.Errorf("matching root hash: %v", err)
	}
	upper := ok
	upper.RootHash = strings.ToUpper(c.RootHash)
	if err := CheckCmdline(upper, c, steps); err != nil {
		t.Errorf("upper-case root hash: %v", err)
	}
	for _, tc := range []struct {
		cmd  Cmdline
		want string
	}{
		{Cmdline{}, "no drover.roothash"},
		{Cmdline{RootHash: strings.Repeat("0", 64), HasRootHash: true}, "different builds"},
		{Cmdline{RootHash: c.RootHash, HasRootHash: true, Break: "nope"}, "names no step"},
		{Cmdline{RootHash: c.RootHash, HasRootHash: true, Break: "mount-api"}, "names no step"},
		{Cmdline{RootHash: c.RootHash, HasRootHash: true, Break: "config"}, "names no step"},
	} {
		err := CheckCmdline(tc.cmd, c, steps)
		if err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("CheckCmdline(%+v) = %v, want %q", tc.cmd, err, tc.want)
		}
	}
	brk := ok
	brk.Break = "modules"
	if err := CheckCmdline(brk, c, steps); err != nil {
		t.Errorf("drover.break=modules: %v", err)
	}
}
