package kmod

import (
	"reflect"
	"strings"
	"testing"
)

func TestLoadOrder(t *testing.T) {
	files, builtin, builtinModinfo := testTree(t)
	idx, err := Build(files, builtin, builtinModinfo, 0)
	if err != nil {
		t.Fatal(err)
	}
	const (
		a = "kernel/drivers/a.ko.xz"
		b = "kernel/drivers/b-mod.ko.zst"
		c = "kernel/lib/c.ko.gz"
		d = "kernel/lib/d.ko"
		e = "extra/e.ko.xz"
	)
	for _, tc := range []struct {
		names []string
		want  []string
	}{
		// modules.dep says "a: b d c"; modprobe reads it back to front, so
		// c d b; e is a's softdep pre:, and a's post: ext4 and b's post:
		// nosuch add nothing (built in, unknown).
		{[]string{"a"}, []string{c, d, b, e, a}},
		{[]string{"b-mod", "d"}, []string{c, b, d}},
		{[]string{"d", "b_mod", "d"}, []string{c, d, b}},
		{[]string{"foo-barbaz"}, []string{e}},                                                        // alias with a wildcard
		{[]string{"pci:v00001AF4d00001001sv00001AF4sd00000002bc01sc00i00"}, []string{c, d, b, e, a}}, // modalias
		{[]string{"symbol:d_fn"}, []string{c, d}},
		{[]string{"ext4", "fs-ext4", "jbd2", "c"}, []string{c}}, // built in: skipped
		{nil, nil},
	} {
		got, err := idx.LoadOrder(tc.names)
		if err != nil {
			t.Errorf("LoadOrder(%q): %v", tc.names, err)
			continue
		}
		if !reflect.DeepEqual(got, tc.want) {
			t.Errorf("LoadOrder(%q) =\n%q\nwant\n%q", tc.names, got, tc.want)
		}
	}

	for _, names := range [][]string{{"a", "nosuch"}, {"[bad"}, {"ext3"}} {
		if _, err := idx.LoadOrder(names); err == nil || !strings.Contains(err.Error(), names[len(names)-1]) {
			t.Errorf("LoadOrder(%q) error %v, want one naming %q", names, err, names[len(names)-1])
		}
	}

	if info := idx.Info("b-mod"); info == nil || info.Name != "b_mod" || info.Builtin || len(info.Exports) != 2 {
		t.Errorf("Info(b-mod) = %+v", info)
	}
	if info := idx.Info("ext4"); info == nil || !info.Builtin || !reflect.DeepEqual(info.SoftdepPre, []string{"crc32c"}) {
		t.Errorf("Info(ext4) = %+v", info)
	}
	if info := idx.Info("jbd2"); info == nil || !info.Builtin {
		t.Errorf("Info(jbd2) = %+v", info)
	}
	if info := idx.Info("nosuch"); info != nil {
		t.Errorf("Info(nosuch) = %+v", info)
	}

	for name, want := range map[string]bool{"ext4": true, "fs_ext4": true, "jbd2": true, "a": false, "nosuch": false} {
		if got := idx.IsBuiltin(name); got != want {
			t.Errorf("IsBuiltin(%q) = %v, want %v", name, got, want)
		}
	}
}

func TestLoadOrderSoftdepCycle(t *testing.T) {
	// Soft dependencies may form cycles (they are not checked by depmod);
	// modprobe's visited set stops them, and so must ours.
	files := map[string][]byte{
		"kernel/x.ko": fakeModule{modinfo: []string{"softdep=pre: y"}}.elf(),
		"kernel/y.ko": fakeModule{modinfo: []string{"softdep=pre: x post: x"}}.elf(),
	}
	idx, err := Build(files, nil, nil, 0)
	if err != nil {
		t.Fatal(err)
	}
	got, err := idx.LoadOrder([]string{"x"})
	if want := []string{"kernel/y.ko", "kernel/x.ko"}; err != nil || !reflect.DeepEqual(got, want) {
		t.Errorf("LoadOrder = %q, %v; want %q", got, err, want)
	}
}

func TestFnmatch(t *testing.T) {
	for _, tc := range []struct {
		pat, s string
		want   bool
	}{
		{"abc", "abc", true},
		{"abc", "abd", false},
		{"a*", "a", true},
		{"a*c", "abbbc", true},
		{"a*c", "abbbd", false},
		{"a**b*", "axxbyy", true},
		{"a?c", "abc", true},
		{"a?c", "ac", false},
		{"pci:v*d*sv*sd*bc01sc*i*", "pci:v00001AF4d00001001sv00001AF4sd00000002bc01sc00i00", true},
		{"pci:v*d*sv*sd*bc02sc*i*", "pci:v00001AF4d00001001sv00001AF4sd00000002bc01sc00i00", false},
		{"x[0-9]y", "x5y", true},
		{"x[0-9]y", "xay", false},
		{"x[!0-9]y", "xay", true},
		{"x[^0-9]y", "x5y", false},
		{"x[]]y", "x]y", true},
		{"x[a-]y", "x-y", true},
		{"x[ab", "x[ab", true}, // unterminated class: literal '['
		{"x\\*y", "x*y", true},
		{"x\\*y", "xay", false},
		{"*", "", true},
		{"", "", true},
		{"", "a", false},
	} {
		if got := fnmatch(tc.pat, tc.s); got != tc.want {
			t.Errorf("fnmatch(%q, %q) = %v, want %v", tc.pat, tc.s, got, tc.want)
		}
	}
}

func TestNormalizeAlias(t *testing.T) {
	for in, want := range map[string]string{
		"dm-verity":          "dm_verity",
		"char-major-10-*":    "char_major_10_*",
		"usb:v*p*d*dc*[0-9]": "usb:v*p*d*dc*[0-9]",
		"a-[x-y]-b":          "a_[x-y]_b",
	} {
		if got, ok := normalizeAlias(in); !ok || got != want {
			t.Errorf("normalizeAlias(%q) = %q, %v; want %q", in, got, ok, want)
		}
	}
	for _, bad := range []string{"a]b", "a[b"} {
		if _, ok := normalizeAlias(bad); ok {
			t.Errorf("normalizeAlias(%q) accepted unbalanced brackets", bad)
		}
	}
}
