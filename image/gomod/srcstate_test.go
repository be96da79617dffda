package gomod

import (
	"bytes"
	"context"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"strings"
	"testing"
)

// gitRepo is a throwaway checkout of a tiny module: cmd/tiny embeds
// msg.txt, .gitignore ignores gen.go.
type gitRepo struct {
	t   *testing.T
	dir string
}

func (r gitRepo) git(args ...string) string {
	r.t.Helper()
	cmd := exec.Command("git", append([]string{"-c", "user.email=t@drover.invalid", "-c", "user.name=t", "-c", "commit.gpgsign=false"}, args...)...)
	cmd.Dir = r.dir
	out, err := cmd.CombinedOutput()
	if err != nil {
		r.t.Fatalf("git %v: %v\n%s", args, err, out)
	}
	return string(bytes.TrimSpace(out))
}

func (r gitRepo) write(name, text string) {
	r.t.Helper()
	must(r.t, os.MkdirAll(filepath.Dir(filepath.Join(r.dir, name)), 0o755))
	must(r.t, os.WriteFile(filepath.Join(r.dir, name), []byte(text), 0o644))
}

const tinyMain = "package main\n\nimport _ \"embed\"\n\n//go:embed msg.txt\nvar msg string\n\nfunc main() { println(msg) }\n"

func newGitRepo(t *testing.T, lang string) gitRepo {
	r := gitRepo{t, t.TempDir()}
	r.write("go.mod", "module example.com/own\n\ngo "+lang+"\n")
	r.write("cmd/tiny/main.go", tinyMain)
	r.write("cmd/tiny/msg.txt", "hello\n")
	r.write(".gitignore", "gen.go\n")
	r.git("init", "-q")
	r.git("add", ".")
	r.git("commit", "-qm", "tiny")
	return r
}

// TestSourceState: each trick that makes `git status` report a modified
// checkout as clean still gives StateDirty; a clean checkout, or one with a file
// the build does not compile, is clean.
func TestSourceState(t *testing.T) {
	if _, err := exec.LookPath("git"); err != nil {
		t.Fatal("git is needed to describe a checkout")
	}
	ctx := context.Background()
	g, err := Env{WorkDir: t.TempDir()}.prepare(ctx)
	if err != nil {
		t.Fatal(err)
	}
	lang, err := langVersion(g.version)
	must(t, err)
	edited := strings.Replace(tinyMain, "println(msg)", "println(msg, \"edited\")", 1)
	for _, tc := range []struct {
		name  string
		trick func(r gitRepo)
		dirty bool
		// fools: `git status --porcelain` (with the environment the trick
		// sets) prints nothing although the compiled files are not HEAD's.
		fools bool
	}{
		{"clean", func(r gitRepo) {}, false, false},
		{"file not compiled", func(r gitRepo) { r.write("notes.txt", "x\n"); r.write("cmd/tiny/gen.go.orig", "x\n") }, false, false},
		{"modified", func(r gitRepo) { r.write("cmd/tiny/main.go", edited) }, true, false},
		{"skip-worktree", func(r gitRepo) {
			r.git("update-index", "--skip-worktree", "cmd/tiny/main.go")
			r.write("cmd/tiny/main.go", edited)
		}, true, true},
		{"assume-unchanged", func(r gitRepo) {
			r.git("update-index", "--assume-unchanged", "cmd/tiny/main.go")
			r.write("cmd/tiny/main.go", edited)
		}, true, true},
		{"skip-worktree embedded file", func(r gitRepo) {
			r.git("update-index", "--skip-worktree", "cmd/tiny/msg.txt")
			r.write("cmd/tiny/msg.txt", "planted\n")
		}, true, true},
		{"showUntrackedFiles=no", func(r gitRepo) {
			r.git("config", "status.showUntrackedFiles", "no")
			r.write("cmd/tiny/extra.go", "package main\n\nfunc init() { println(\"extra\") }\n")
		}, true, true},
		{"ignored compiled file", func(r gitRepo) {
			r.write("cmd/tiny/gen.go", "package main\n\nfunc init() { println(\"gen\") }\n")
		}, true, true},
		{"excluded compiled file", func(r gitRepo) {
			must(r.t, os.WriteFile(filepath.Join(r.dir, ".git", "info", "exclude"), []byte("cmd/tiny/local.go\n"), 0o644))
			r.write("cmd/tiny/local.go", "package main\n\nfunc init() { println(\"local\") }\n")
		}, true, true},
		{"GIT_DIR elsewhere", func(r gitRepo) {
			// Another repository holds the edited file, committed: with
			// GIT_DIR and GIT_WORK_TREE pointing there, status is clean.
			r.write("cmd/tiny/main.go", edited)
			other := gitRepo{r.t, r.t.TempDir()}
			other.git("init", "-q")
			other.git("--work-tree="+r.dir, "add", ".")
			other.git("--work-tree="+r.dir, "commit", "-qm", "edited")
			r.t.Setenv("GIT_DIR", filepath.Join(other.dir, ".git"))
			r.t.Setenv("GIT_WORK_TREE", r.dir)
		}, true, true},
		{"replaced commit", func(r gitRepo) {
			// refs/replace makes HEAD read as a commit with the edit.
			r.write("cmd/tiny/main.go", edited)
			r.git("add", "cmd/tiny/main.go")
			edit := r.git("commit-tree", r.git("write-tree"), "-p", "HEAD", "-m", "edited")
			r.git("replace", r.git("rev-parse", "HEAD"), edit)
		}, true, true},
		{"go.mod", func(r gitRepo) {
			r.git("update-index", "--skip-worktree", "go.mod")
			r.write("go.mod", "module example.com/own\n\ngo "+lang+"\n\ngodebug panicnil=1\n")
		}, true, true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			r := newGitRepo(t, lang)
			head := r.git("rev-parse", "HEAD")
			tc.trick(r)
			status := exec.Command("git", "status", "--porcelain")
			status.Dir = r.dir
			out, err := status.Output()
			if err != nil {
				t.Fatalf("git status: %v", err)
			}
			if fooled := len(out) == 0 && tc.dirty; fooled != tc.fools {
				t.Fatalf("git status says %q: the trick does not work as the case says (fools=%v)", out, tc.fools)
			}
			s, diff, err := g.sourceState(ctx, &Source{Dir: r.dir, Module: "example.com/own"}, []string{"GOOS=linux", "GOARCH=" + runtime.GOARCH}, "./cmd/tiny")
			if err != nil {
				t.Fatal(err)
			}
			want := StateClean
			if tc.dirty {
				want = StateDirty
			}
			if s.State != want || s.Commit != head || (len(diff) > 0) != tc.dirty {
				t.Errorf("state %+v (differences %q), want commit %s, %s", s, diff, head, want)
			}
			t.Logf("%s: %q", s, diff)
		})
	}
}

// TestSourceStateNotGit: a source tarball has no commit to compare with,
// and neither has a checkout copied without its .git, or one git cannot
// read: each is StateUnknown, never clean.
func TestSourceStateNotGit(t *testing.T) {
	ctx := context.Background()
	g, err := Env{WorkDir: t.TempDir()}.prepare(ctx)
	must(t, err)
	lang, err := langVersion(g.version)
	must(t, err)
	copyWithoutGit := func(t *testing.T) string {
		r := newGitRepo(t, lang)
		dst := t.TempDir()
		must(t, os.CopyFS(dst, os.DirFS(r.dir)))
		must(t, os.RemoveAll(filepath.Join(dst, ".git")))
		return dst
	}
	for _, tc := range []struct {
		name string
		dir  func(t *testing.T) string
	}{
		{"source tarball", func(t *testing.T) string { return tinySource(t, g.version).Dir }},
		{"checkout copied without .git", copyWithoutGit},
		{"git missing", func(t *testing.T) string {
			r := newGitRepo(t, lang)
			t.Setenv("PATH", t.TempDir()) // the go command g runs is already resolved
			return r.dir
		}},
		{"git failing", func(t *testing.T) string {
			r := newGitRepo(t, lang)
			must(t, os.WriteFile(filepath.Join(r.dir, ".git", "HEAD"), []byte("garbage\n"), 0o644))
			return r.dir
		}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			src := &Source{Dir: tc.dir(t), Module: "example.com/own"}
			s, diff, err := g.sourceState(ctx, src, nil, "./cmd/tiny")
			if err != nil || s.Commit != "" || s.State != StateUnknown || diff != nil {
				t.Errorf("state %+v, %q, %v; want no commit, state unknown", s, diff, err)
			}
			if s.String() != "example.com/own@unknown-commit" {
				t.Errorf("String() = %q", s)
			}
		})
	}
}

// TestDifferences covers what a checkout cannot easily show: a compiled
// file outside the checkout (a directory replace) and a sha256 repository.
func TestDifferences(t *testing.T) {
	top, outside := t.TempDir(), t.TempDir()
	must(t, os.WriteFile(filepath.Join(top, "a.go"), []byte("package a\n"), 0o644))
	must(t, os.WriteFile(filepath.Join(outside, "b.go"), []byte("package b\n"), 0o644))
	// printf 'package a\n' | git hash-object --stdin, in a sha1 and in a
	// sha256 repository.
	for format, id := range map[string]string{
		"sha1":   "2a93cdef549545101b086408d9ee767fda0c02c2",
		"sha256": "72a4d4079781c4379675f834db8441055307f460b39f182a836a7bfb1f3910fc",
	} {
		if got, err := blobID(format, []byte("package a\n")); got != id || err != nil {
			t.Errorf("%s blob id %s, %v; want git's %s", format, got, err, id)
		}
		tree := &commitTree{top: top, commit: "c", format: format, blobs: map[string]string{"a.go": id}}
		got, err := tree.differences([]string{filepath.Join(top, "a.go"), filepath.Join(outside, "b.go")}, os.ReadFile)
		must(t, err)
		if len(got) != 1 || !strings.HasSuffix(got[0], "b.go: outside the checkout") {
			t.Errorf("%s: differences %q, want only b.go outside the checkout", format, got)
		}
	}
	if _, err := blobID("md5", nil); err == nil {
		t.Error("an unknown object format is accepted")
	}
}

// TestDescribeTree: a recipe directory in a clean checkout names its
// commit; a changed or added file makes it dirty; the same files copied
// without .git are unknown, with the same digest of the files.
func TestDescribeTree(t *testing.T) {
	ctx := context.Background()
	r := newGitRepo(t, "1.26")
	head := r.git("rev-parse", "HEAD")
	dir := filepath.Join(r.dir, "cmd")
	clean, diff, err := DescribeTree(ctx, dir)
	must(t, err)
	if clean.Commit != head || clean.State != StateClean || clean.Files != 2 || len(diff) != 0 || len(clean.DirHash) != 64 {
		t.Errorf("clean: %+v %q, want commit %s, clean, 2 files", clean, diff, head)
	}

	cp := t.TempDir()
	must(t, os.CopyFS(cp, os.DirFS(dir)))
	copied, _, err := DescribeTree(ctx, cp)
	must(t, err)
	if copied.Commit != "" || copied.State != StateUnknown || copied.DirHash != clean.DirHash {
		t.Errorf("copy without .git: %+v, want no commit, unknown, dirHash %s", copied, clean.DirHash)
	}

	r.write("cmd/tiny/msg.txt", "planted\n")
	dirty, diff, err := DescribeTree(ctx, dir)
	must(t, err)
	if dirty.Commit != head || dirty.State != StateDirty || len(diff) != 1 || dirty.DirHash == clean.DirHash {
		t.Errorf("changed file: %+v %q, want dirty with one difference and another dirHash", dirty, diff)
	}
}
