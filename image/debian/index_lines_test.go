package debian

import (
	"strings"
	"testing"
)

// TestParseIndexErrorsNameTheLine: a broken index is reported at the line
// (and stanza) where it breaks, so the mirror's file can be looked at.
func TestParseIndexErrorsNameTheLine(t *testing.T) {
	long := "x" + strings.Repeat("y", 59) // 60 bytes: shown whole
	for _, tc := range []struct{ name, text, want string }{
		{"second stanza without Package", "Package: a\nVersion: 1\n\nVersion: 2\n\n",
			"stanza at line 4 has no Package field"},
		{"stanza without Version at the end of the file", "Package: a\nVersion: 1\n\nPackage: b\nSize: 1",
			"package b (line 4) has no Version field"},
		{"stanza starting after several blank lines", "\n\n\nPackage: c\n\n",
			"package c (line 4) has no Version field"},
		{"bad Size", "Package: a\nVersion: 1\nSize: 12k\n", `line 3: Size: bad number "12k"`},
		{"bad Installed-Size", "Package: a\nVersion: 1\nInstalled-Size: -1\n", `line 3: Installed-Size: bad number "-1"`},
		{"empty Size", "Package: a\nVersion: 1\nSize:\n", `line 3: Size: bad number ""`},
		{"19-digit Size", "Package: a\nVersion: 1\nSize: 1234567890123456789\n", `line 3: Size: bad number "1234567890123456789"`},
		{"line without a colon", "Package: a\nbogus line\n", `line 2: "bogus line" is not a field`},
		{"line with an empty field name", "Package: a\nVersion: 1\n: value\n", `line 3: ": value" is not a field`},
		{"CRLF line without a colon", "Package: a\r\nbogus\r\n", `line 2: "bogus" is not a field`},
		{"60-byte bad line shown whole", "Package: a\n" + long + "\n", `line 2: "` + long + `" is not a field`},
		{"61-byte bad line cut at 60", "Package: a\n" + long + "z\n", `line 2: "` + long + `…" is not a field`},
	} {
		_, err := ParseIndex([]byte(tc.text))
		if err == nil || err.Error() != tc.want {
			t.Errorf("%s: ParseIndex = %v, want %q", tc.name, err, tc.want)
		}
	}
}

// TestParseIndexNumbers: Size and Installed-Size take every decimal digit,
// up to 18 of them (more could overflow int64).
func TestParseIndexNumbers(t *testing.T) {
	for _, tc := range []struct {
		size string
		want int64
	}{
		{"0", 0},
		{"9", 9},
		{"1234567890", 1234567890},
		{"999999999999999999", 999999999999999999},
	} {
		pkgs, err := ParseIndex([]byte("Package: a\nVersion: 1\nSize: " + tc.size + "\nInstalled-Size: " + tc.size + "\n"))
		if err != nil {
			t.Errorf("Size %s: %v", tc.size, err)
			continue
		}
		if pkgs[0].Size != tc.want || pkgs[0].InstalledSize != tc.want {
			t.Errorf("Size %s parsed as %d / %d", tc.size, pkgs[0].Size, pkgs[0].InstalledSize)
		}
	}
}

// TestParseIndexContinuationLines: a relation field may continue over
// lines starting with a space or a tab, and may start on the line below its
// name; blank-looking continuation lines add nothing.
func TestParseIndexContinuationLines(t *testing.T) {
	text := "Package: a\nVersion: 1\n" +
		"Depends:\n libc6 (>= 2.38),\n \t \n\tlibacl1\n" +
		"Description: short\n more text: Depends: not-a-dependency\n" +
		"Provides: x,\n y\n" +
		"Conflicts: c\n\n" +
		"Package: b\r\nVersion: 2\r\nBreaks: d,\r\n e\r\n"
	pkgs, err := ParseIndex([]byte(text))
	if err != nil {
		t.Fatal(err)
	}
	if len(pkgs) != 2 {
		t.Fatalf("parsed %d packages, want 2", len(pkgs))
	}
	a, b := pkgs[0], pkgs[1]
	if a.Depends != "libc6 (>= 2.38), libacl1" {
		t.Errorf("Depends = %q", a.Depends)
	}
	if a.Provides != "x, y" || a.Conflicts != "c" {
		t.Errorf("Provides = %q, Conflicts = %q", a.Provides, a.Conflicts)
	}
	if b.Name != "b" || b.Version != "2" || b.Breaks != "d, e" || b.Depends != "" {
		t.Errorf("second stanza = %+v", b)
	}
}

// TestSplitProvidesOddItems: an entry is cut at its first space, "(" or
// ":", and only an "=" relation gives it a version.
func TestSplitProvidesOddItems(t *testing.T) {
	for in, want := range map[string][]provideEntry{
		"a(=1)":          {{"a", "1"}},
		"a (>= 1)":       {{"a", ""}},
		"a:any":          {{"a", ""}},
		"a ( = 2 )":      {{"a", "2"}},
		" , ,b":          {{"b", ""}},
		"":               nil,
		"a (= 1), b (=)": {{"a", "1"}, {"b", ""}},
	} {
		got := splitProvides(in)
		if len(got) != len(want) {
			t.Errorf("splitProvides(%q) = %v, want %v", in, got, want)
			continue
		}
		for i := range got {
			if got[i] != want[i] {
				t.Errorf("splitProvides(%q) = %v, want %v", in, got, want)
				break
			}
		}
	}
}

// TestIndexEssentialAndLookup: Essential lists each essential name once,
// sorted, whatever the archive order and duplicates; Lookup keeps archive
// order.
func TestIndexEssentialAndLookup(t *testing.T) {
	idx := NewIndex("trixie", []string{"main"}, []Package{
		{Name: "zsh-base", Version: "1", Essential: true},
		{Name: "dash", Version: "2", Essential: true},
		{Name: "dash", Version: "1", Essential: true},
		{Name: "bash", Version: "5"},
	})
	if got := strings.Join(idx.Essential(), " "); got != "dash zsh-base" {
		t.Errorf("Essential = %q", got)
	}
	got := idx.Lookup("dash")
	if len(got) != 2 || got[0].Version != "2" || got[1].Version != "1" {
		t.Errorf("Lookup(dash) = %+v", got)
	}
	if got := idx.Lookup("nosuch"); len(got) != 0 {
		t.Errorf("Lookup(nosuch) = %+v", got)
	}
}
