package lock

import (
	"bytes"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

func sample() *Lock {
	return &Lock{
		Inputs:    "ab12",
		Epoch:     1764000000,
		Toolchain: "go1.26.8",
		Suites: []Suite{{Name: "trixie", Date: time.Date(2026, 11, 29, 8, 0, 0, 0, time.UTC), InRelease: "ff00",
			Signer: "41587F7DB8C774BCCF131416762F67A0B2C39DE4", Trust: "repo:recipes/keys/debian-archive-trixie.asc"}},
		Debs: []Deb{
			{Name: "systemd", Version: "257.13-1~deb13u1", Arch: "amd64", Size: 100, SHA256: "bb", Suite: "trixie-security", Path: "pool/main/s/systemd/systemd_257.13-1~deb13u1_amd64.deb"},
			{Name: "base-files", Version: "13.8", Arch: "amd64", Size: 7, SHA256: "aa", Suite: "trixie", Path: "pool/main/b/base-files/base-files_13.8_amd64.deb"},
		},
		Go: []Go{{Name: "kubelet", Module: "k8s.io/kubernetes", Version: "v1.36.3", Package: "k8s.io/kubernetes/cmd/kubelet", Toolchain: "go1.26.8",
			GoMod: []string{"module drover.invalid/build/kubelet", "require k8s.io/kubernetes v1.36.3"},
			Sum:   []string{"k8s.io/kubernetes v1.36.3 h1:x=", "k8s.io/api v0.36.3 h1:y="}}},
		URLs: []URL{{Name: "tool", SHA256: "cc", Size: 3, URL: "https://example.invalid/tool"}},
	}
}

func TestRoundTripIsStable(t *testing.T) {
	text := sample().Format("generated for a test")
	l, err := Parse("x.lock", text)
	if err != nil {
		t.Fatal(err)
	}
	again := l.Format("generated for a test")
	if !bytes.Equal(text, again) {
		t.Fatalf("format is not stable:\n%s\n---\n%s", text, again)
	}
	if !strings.Contains(string(text), "deb base-files 13.8 amd64 7 aa trixie pool/main/b/base-files/base-files_13.8_amd64.deb\ndeb systemd") {
		t.Errorf("debs not sorted by name:\n%s", text)
	}
	if !strings.Contains(string(text), "\nsuite trixie 2026-11-29T08:00:00Z ff00\nsigner trixie 41587F7DB8C774BCCF131416762F67A0B2C39DE4 repo:recipes/keys/debian-archive-trixie.asc\n") {
		t.Errorf("suite signer not recorded after its suite:\n%s", text)
	}
	if l.Toolchain != "go1.26.8" || !strings.Contains(string(text), "\ntoolchain go1.26.8\n") {
		t.Errorf("toolchain did not round-trip: %q", l.Toolchain)
	}
	if l.Suites[0].Signer != sample().Suites[0].Signer || l.Suites[0].Trust != sample().Suites[0].Trust {
		t.Errorf("signer did not round-trip: %+v", l.Suites[0])
	}
	if !strings.Contains(string(text), "gosum kubelet k8s.io/api v0.36.3 h1:y=\ngosum kubelet k8s.io/kubernetes") {
		t.Errorf("go.sum lines not sorted:\n%s", text)
	}
}

func TestParseErrors(t *testing.T) {
	for _, tc := range []struct{ text, want string }{
		{"lock 1\ninputs x\nepoch 1 x\ndeb a 1 amd64 1 aa pool/a.deb\n", "x.lock:4: a format 1 lock has one suite line before its deb lines; the lock is damaged: run `drover lock` again"},
		{"lock 2\ndeb a b\n", "x.lock:2: \"deb\" line wants 8 fields, has 3; the lock is damaged: run `drover lock` again"},
		{"lock 3\n", "x.lock:1: lock format 3 is not supported (this drover reads 2); the lock is damaged: run `drover lock` again"},
		{"inputs x\n", "x.lock: not a drover lock file (no `lock 2` line); run `drover lock` again"},
		{"lock 2\ngosum k a b c\n", "x.lock:2: gosum for unknown Go component \"k\"; the lock is damaged: run `drover lock` again"},
		{"lock 2\nsigner trixie AB repo:x\n", "x.lock:2: signer for suite \"trixie\" does not follow its suite line; the lock is damaged: run `drover lock` again"},
		{"lock 2\nsuite trixie 2026-11-29T08:00:00Z ff\nsigner trixie AB repo:x\nsigner trixie CD repo:x\n", "x.lock:4: suite \"trixie\" has two signer lines; the lock is damaged: run `drover lock` again"},
		{"lock 2\ntoolchain 1.26\n", "x.lock:2: toolchain \"1.26\" is not a Go release (go1.X.Y); the lock is damaged: run `drover lock` again"},
		{"lock 2\nfrob x\n", "x.lock:2: unknown line kind \"frob\"; the lock is damaged: run `drover lock` again"},
	} {
		_, err := Parse("x.lock", []byte(tc.text))
		if err == nil || err.Error() != tc.want {
			t.Errorf("Parse(%q) error\n got: %v\nwant: %s", tc.text, err, tc.want)
		}
	}
}

func TestStale(t *testing.T) {
	l := sample()
	if err := l.CheckFresh("recipes/a.yaml", "ab12"); err != nil {
		t.Fatal(err)
	}
	err := l.CheckFresh("recipes/a.yaml", "other")
	want := "lock recipes/a.yaml.lock does not match recipe recipes/a.yaml (its packages, kernel, suites or components changed since it was locked): run `drover lock recipes/a.yaml`"
	if err == nil || err.Error() != want {
		t.Fatalf("got %v", err)
	}
}

func TestWriteAtomicAndReadMissing(t *testing.T) {
	dir := t.TempDir()
	p := filepath.Join(dir, "r.yaml.lock")
	if _, err := Read(p); err == nil || !strings.Contains(err.Error(), "run `drover lock "+filepath.Join(dir, "r.yaml")+"` first") {
		t.Fatalf("missing lock error: %v", err)
	}
	if err := Write(p, sample().Format("")); err != nil {
		t.Fatal(err)
	}
	ents, _ := os.ReadDir(dir)
	if len(ents) != 1 {
		t.Fatalf("temp files left behind: %v", ents)
	}
	if _, err := Read(p); err != nil {
		t.Fatal(err)
	}
}

// TestReadsFormat1: a lock written before deb lines named their suite is
// still read (its one suite for every package), so the first re-lock
// keeps its Go pins; it is written back as format 2.
func TestReadsFormat1(t *testing.T) {
	text := "lock 1\ninputs ab\nepoch 1 x\nsuite trixie 2026-11-29T08:00:00Z ff\ndeb a 1 amd64 1 aa pool/a.deb\n"
	l, err := Parse("x.lock", []byte(text))
	if err != nil {
		t.Fatal(err)
	}
	if len(l.Debs) != 1 || l.Debs[0].Suite != "trixie" || l.Debs[0].Path != "pool/a.deb" {
		t.Fatalf("format 1 deb line: %+v", l.Debs)
	}
	if out := string(l.Format("")); !strings.Contains(out, "lock 2\n") || !strings.Contains(out, "deb a 1 amd64 1 aa trixie pool/a.deb\n") {
		t.Errorf("written back as:\n%s", out)
	}
	if _, err := Parse("x.lock", []byte(strings.Replace(text, "lock 1", "lock 2", 1))); err == nil {
		t.Error("a format 2 lock with a 7-field deb line was read")
	}
}

func TestChanges(t *testing.T) {
	old := []byte("# header\nlock 2\ninputs x\nepoch 1 1970-01-01T00:00:01Z\n\ndeb a 1 amd64 1 aa trixie pool/a\ndeb b 1 amd64 1 bb trixie pool/b\n")
	new := []byte("# other header\nlock 2\ninputs x\nepoch 1 1970-01-01T00:00:01Z\ndeb a 1 amd64 1 aa trixie pool/a\ndeb b 2 amd64 1 cc trixie pool/b\ndeb c 1 amd64 1 dd trixie pool/c\n")
	removed, added := Changes(old, new)
	if fmt.Sprint(removed) != "[{7 deb b 1 amd64 1 bb trixie pool/b}]" || fmt.Sprint(added) != "[{6 deb b 2 amd64 1 cc trixie pool/b} {7 deb c 1 amd64 1 dd trixie pool/c}]" {
		t.Errorf("removed %v, added %v", removed, added)
	}
	if r, a := Changes(old, old); len(r)+len(a) != 0 {
		t.Errorf("a lock against itself: %v %v", r, a)
	}
}
