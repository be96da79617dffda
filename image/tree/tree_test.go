package tree

import (
	"strings"
	"testing"
)

func TestMergedUsr(t *testing.T) {
	tr := New()
	if err := tr.Add(&Node{Path: "./lib/systemd/systemd", Kind: Regular, Mode: 0o755, Data: []byte("x"), Owner: "systemd"}); err != nil {
		t.Fatal(err)
	}
	if tr.Get("/usr/lib/systemd/systemd") == nil || tr.Get("/lib/systemd/systemd") == nil {
		t.Fatal("merged-/usr path not canonicalised")
	}
	if n := tr.Get("/lib"); n == nil || n.Kind != Symlink || n.Target != "usr/lib" {
		t.Fatalf("/lib is %+v", n)
	}
	if err := tr.Add(&Node{Path: "/bin", Kind: Dir, Mode: 0o755, Owner: "base-files"}); err != nil {
		t.Fatalf("a package's /bin directory must fold into the symlink: %v", err)
	}
	if got := Canonical("sbin/../etc//x"); got != "/etc/x" {
		t.Errorf("Canonical = %q", got)
	}
}

func TestConflicts(t *testing.T) {
	tr := New()
	a := &Node{Path: "/usr/bin/x", Kind: Regular, Mode: 0o755, Data: []byte("a"), Owner: "pkg-a"}
	if err := tr.Add(a); err != nil {
		t.Fatal(err)
	}
	same := *a
	same.Owner = "pkg-c"
	if err := tr.Add(&same); err != nil {
		t.Fatalf("identical content is not a conflict: %v", err)
	}
	err := tr.Add(&Node{Path: "/usr/bin/x", Kind: Regular, Mode: 0o755, Data: []byte("b"), Owner: "pkg-b"})
	want := "/usr/bin/x is shipped by both pkg-a and pkg-b with different content: pick one with `prefer: {/usr/bin/x: PACKAGE}` in the recipe"
	if err == nil || err.Error() != want {
		t.Fatalf("got %v", err)
	}
	tr.Prefer = map[string]string{"/usr/bin/x": "pkg-b"}
	if err := tr.Add(&Node{Path: "/usr/bin/x", Kind: Regular, Mode: 0o755, Data: []byte("b"), Owner: "pkg-b"}); err != nil {
		t.Fatal(err)
	}
	if string(tr.Get("/usr/bin/x").Data) != "b" {
		t.Error("prefer did not pick pkg-b")
	}
	// The merged-/usr layout is not a package's to replace, prefer: or
	// not, and the error does not suggest one.
	tr.Prefer = map[string]string{"/usr": "rt", "/usr/lib": "rt"}
	for p, n := range map[string]*Node{
		"/usr":     {Path: "/usr", Kind: Regular, Mode: 0o644, Data: []byte("x"), Owner: "rt"},
		"/usr/lib": {Path: "/usr/lib", Kind: Symlink, Target: "/opt/lib", Owner: "rt"},
		"/lib":     {Path: "/lib", Kind: Symlink, Target: "/opt/lib", Owner: "rt"},
	} {
		want := n.Kind.String() + " " + p + " from rt: " + p + " is the merged-/usr layout's " + tr.Get(p).Kind.String() + ", which every image has and no package can replace"
		if err := tr.Add(n); err == nil || err.Error() != want {
			t.Errorf("%s: got %v, want %s", p, err, want)
		}
	}
	if n := tr.Get("/usr"); n.Kind != Dir || n.Owner != "drover" {
		t.Errorf("/usr is now %+v", n)
	}
}

func TestParentsAndRemove(t *testing.T) {
	tr := New()
	tr.Add(&Node{Path: "/usr/share/doc/a/copyright", Kind: Regular, Mode: 0o644, Owner: "a"})
	if n := tr.Get("/usr/share/doc"); n == nil || n.Kind != Dir || n.Mode != 0o755 {
		t.Fatalf("implied parent: %+v", n)
	}
	tr.Add(&Node{Path: "/usr/share/doc", Kind: Dir, Mode: 0o750, Owner: "b"})
	if tr.Get("/usr/share/doc").Mode != 0o750 {
		t.Error("a package's directory must replace an implied one")
	}
	if n := tr.Remove("/usr/share/doc"); n != 3 {
		t.Errorf("removed %d nodes", n)
	}
	tr.Add(&Node{Path: "/etc/f", Kind: Regular, Owner: "a"})
	if err := tr.Add(&Node{Path: "/etc/f/g", Kind: Regular, Owner: "b"}); err == nil || !strings.Contains(err.Error(), "not a directory") {
		t.Errorf("file as parent: %v", err)
	}
	paths := tr.Paths()
	for i := 1; i < len(paths); i++ {
		if paths[i-1] >= paths[i] {
			t.Fatal("paths not sorted")
		}
	}
}
