package lock

import "testing"

// TestBlankAndTabbedLines: a merge or an editor leaves lines of only blanks
// and tab-separated fields; Parse reads them like Format's own output.
func TestBlankAndTabbedLines(t *testing.T) {
	text := "lock 1\n   \n\t\ninputs ab\nepoch 0 x\ngo k m@v p t\ngomod\tk\trequire  a v1\n  gosum k a v1 h1:x=\n"
	l, err := Parse("x.lock", []byte(text))
	if err != nil {
		t.Fatal(err)
	}
	if len(l.Go) != 1 || len(l.Go[0].GoMod) != 1 || l.Go[0].GoMod[0] != "require  a v1" || len(l.Go[0].Sum) != 1 || l.Go[0].Sum[0] != "a v1 h1:x=" {
		t.Fatalf("got %+v", l.Go)
	}
}
