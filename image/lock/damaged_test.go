package lock

import "testing"

// TestBlankAndTabbedLines: a merge or an editor leaves lines of only blanks
// and tab-separated fields; Parse reads them like Format's own output.
func TestBlankAndTabbedLines(t *testing.T) {
	text := "lock 2\n   \n\t\ninputs ab\nepoch 0 x\ngo k m@v p t\ngomod\tk\trequire  a v1\n  gosum k a v1 h1:x=\n"
	l, err := Parse("x.lock", []byte(text))
	if err != nil {
		t.Fatal(err)
	}
	if len(l.Go) != 1 || len(l.Go[0].GoMod) != 1 || l.Go[0].GoMod[0] != "require  a v1" || len(l.Go[0].Sum) != 1 || l.Go[0].Sum[0] != "a v1 h1:x=" {
		t.Fatalf("got %+v", l.Go)
	}
}

// TestHeaderLinesOnce: a lock without its inputs or epoch, or with two of
// them after a merge, is refused instead of building with inputs "" or the
// epoch 1970.
func TestHeaderLinesOnce(t *testing.T) {
	for _, tc := range []struct{ text, want string }{
		{"lock 2\nepoch 5 x\n", "x.lock: no \"inputs\" line; the lock is damaged: run `drover lock` again"},
		{"lock 2\ninputs a\n", "x.lock: no \"epoch\" line; the lock is damaged: run `drover lock` again"},
		{"lock 2\ninputs a\nepoch 5 x\ninputs b\n", "x.lock:4: \"inputs\" line given twice (first on line 2); the lock is damaged: run `drover lock` again"},
		{"lock 2\ninputs a\nepoch 5 x\nepoch 6 x\n", "x.lock:4: \"epoch\" line given twice (first on line 3); the lock is damaged: run `drover lock` again"},
	} {
		_, err := Parse("x.lock", []byte(tc.text))
		if err == nil || err.Error() != tc.want {
			t.Errorf("Parse(%q) error\n got: %v\nwant: %s", tc.text, err, tc.want)
		}
	}
}
