package gomod

import (
	"context"
	"encoding/json"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"slices"
	"strings"
	"testing"
)

// planted are build settings a host could slip into a build through
// $GOROOT/go.env, the go env -w file or the environment. Each changes the
// binary (or breaks the build) when it gets through.
var planted = []string{
	"GOAMD64=v3", "GOARM64=v9.0", "GOEXPERIMENT=jsonv2", "GOFIPS140=latest", "GOFLAGS=-tags=planted",
	"CGO_ENABLED=1", "GO_EXTLINK_ENABLED=1", "GOTOOLCHAIN=go1.99.1",
}

// fakeGOROOT makes a Go installation that is the real one (rootDir) with
// its go.env replaced: a copy of the go binary in bin/ (the go command finds
// its GOROOT from its own path) and links to everything else. With
// plantStd, package container/ring has one more file, which prints
// "planted".
func fakeGOROOT(t *testing.T, rootDir string, goEnv []string, plantStd bool) (root, goBin string) {
	t.Helper()
	root = t.TempDir()
	// linkAll links the entries of from into to, but for those in skip.
	linkAll := func(from, to string, skip ...string) {
		ents, err := os.ReadDir(from)
		must(t, err)
		for _, e := range ents {
			if !slices.Contains(skip, e.Name()) {
				must(t, os.Symlink(filepath.Join(from, e.Name()), filepath.Join(to, e.Name())))
			}
		}
	}
	if plantStd {
		linkAll(rootDir, root, "bin", "go.env", "src")
		ring := filepath.Join(root, "src", "container", "ring")
		must(t, os.MkdirAll(ring, 0o755))
		linkAll(filepath.Join(rootDir, "src"), filepath.Join(root, "src"), "container")
		linkAll(filepath.Join(rootDir, "src", "container"), filepath.Join(root, "src", "container"), "ring")
		linkAll(filepath.Join(rootDir, "src", "container", "ring"), ring)
		must(t, os.WriteFile(filepath.Join(ring, "planted.go"), []byte("package ring\n\nfunc init() { println(\"planted\") }\n"), 0o644))
	} else {
		linkAll(rootDir, root, "bin", "go.env")
	}
	must(t, os.Mkdir(filepath.Join(root, "bin"), 0o755))
	goBin = filepath.Join(root, "bin", "go")
	if os.Link(filepath.Join(rootDir, "bin", "go"), goBin) != nil {
		in, err := os.Open(filepath.Join(rootDir, "bin", "go"))
		must(t, err)
		defer in.Close()
		out, err := os.OpenFile(goBin, os.O_CREATE|os.O_WRONLY, 0o755)
		must(t, err)
		_, err = io.Copy(out, in)
		must(t, err)
		must(t, out.Close())
	}
	must(t, os.WriteFile(filepath.Join(root, "go.env"), []byte(strings.Join(goEnv, "\n")+"\n"), 0o644))
	return root, goBin
}

// hostGOROOT is the installed toolchain's root, as prepare finds it.
func hostGOROOT(t *testing.T) (root, version string) {
	t.Helper()
	g, err := Env{WorkDir: t.TempDir()}.prepare(context.Background())
	if err != nil {
		t.Fatalf("no usable go command (the tests need the Go toolchain they run under): %v", err)
	}
	for _, kv := range g.base {
		if v, ok := strings.CutPrefix(kv, "GOROOT="); ok {
			return v, g.version
		}
	}
	t.Fatalf("prepare set no GOROOT: %v", g.base)
	return "", ""
}

// tinySource is a module with one command that uses code the planted
// settings change (crypto under FIPS 140, amd64 v3 instructions, a tag, a
// std package).
func tinySource(t *testing.T, goVersion string) *Source {
	t.Helper()
	lang, err := langVersion(goVersion)
	must(t, err)
	dir := t.TempDir()
	files := map[string]string{
		"go.mod": "module example.com/own\n\ngo " + lang + "\n",
		"cmd/tiny/main.go": "package main\n\nimport (\n\t\"container/ring\"\n\t\"crypto/sha256\"\n\t\"fmt\"\n\t\"math/bits\"\n\t\"os\"\n)\n\n" +
			"var tag = \"\"\n\nfunc main() { fmt.Println(sha256.Sum256([]byte(os.Args[0])), bits.OnesCount(uint(len(os.Args))), ring.New(2).Len(), tag) }\n",
		"cmd/tiny/planted.go": "//go:build planted\n\npackage main\n\nfunc init() { tag = \"planted\" }\n",
	}
	for name, text := range files {
		must(t, os.MkdirAll(filepath.Dir(filepath.Join(dir, name)), 0o755))
		must(t, os.WriteFile(filepath.Join(dir, name), []byte(text), 0o644))
	}
	return &Source{Dir: dir, Module: "example.com/own"}
}

// TestPlantedSettingsDoNotReachTheBinary builds a tiny module through
// BuildLocal, as drover-agent is built, with settings planted where the go
// command reads them, and wants the bytes of a clean build every time.
func TestPlantedSettingsDoNotReachTheBinary(t *testing.T) {
	ctx := context.Background()
	realRoot, version := hostGOROOT(t)
	_, fakeGo := fakeGOROOT(t, realRoot, planted, false)
	// A GOROOT a caller or the go env -w file could name: planted settings
	// and a std package with one more file.
	fakeRoot, fakeRootGo := fakeGOROOT(t, realRoot, planted, true)

	// The plant is live: the fake toolchain, left to itself, takes it.
	cmd := exec.Command(fakeGo, "env", "-json", "GOAMD64", "GOEXPERIMENT", "GOFIPS140", "GOFLAGS")
	cmd.Env = append(cleanEnviron(os.Environ()), "GOENV=off", "GOTOOLCHAIN=local") // go1.99.1 is not to be had
	out, err := cmd.Output()
	if err != nil {
		t.Fatalf("%v: %v", cmd, err)
	}
	var live map[string]string
	must(t, json.Unmarshal(out, &live))
	if live["GOAMD64"] != "v3" || live["GOEXPERIMENT"] != "jsonv2" || live["GOFIPS140"] != "latest" || live["GOFLAGS"] != "-tags=planted" {
		t.Fatalf("the fake GOROOT's go.env is not read (%v): this test would prove nothing", live)
	}
	cmd = exec.Command(fakeRootGo, "list", "-f", "{{.GoFiles}}", "container/ring")
	cmd.Env = append(cleanEnviron(os.Environ()), "GOENV=off", "GOTOOLCHAIN=local")
	if out, err := cmd.Output(); err != nil || !strings.Contains(string(out), "planted.go") {
		t.Fatalf("the fake GOROOT's container/ring is not the planted one (%s, %v): this test would prove nothing", out, err)
	}

	userEnv := filepath.Join(t.TempDir(), "env")
	must(t, os.WriteFile(userEnv, []byte(strings.Join(append(planted, "GOROOT="+fakeRoot), "\n")+"\n"), 0o644))
	src := tinySource(t, version)
	build := func(t *testing.T, goBin string, extra ...string) *Binary {
		t.Helper()
		env := Env{Go: goBin, WorkDir: t.TempDir(), Toolchain: version, Log: testLog{t}, Environ: append(os.Environ(), extra...)}
		b, err := BuildLocal(ctx, env, nil, src, "./cmd/tiny", "linux", runtime.GOARCH, t.TempDir())
		if err != nil {
			t.Fatal(err)
		}
		return b
	}
	clean := build(t, "")
	for _, s := range clean.BuildInfo.Settings {
		if s.Key == "-tags" || s.Key == "GOFIPS140" || (s.Key == "GOAMD64" && s.Value != "v1") || s.Key == "DefaultGODEBUG" {
			t.Errorf("the clean build records %s=%s", s.Key, s.Value)
		}
	}
	for _, tc := range []struct {
		name  string
		goBin string
		extra []string
	}{
		{"toolchain's go.env", fakeGo, nil},
		{"GOROOT from the caller", "", []string{"GOROOT=" + fakeRoot}},
		{"go env -w file", "", []string{"GOENV=" + userEnv}},
		{"caller's environment", "", planted},
	} {
		t.Run(tc.name, func(t *testing.T) {
			b := build(t, tc.goBin, tc.extra...)
			if b.SHA256 != clean.SHA256 {
				t.Errorf("sha256 %s, want the clean build's %s; build settings:\n%v\nclean:\n%v", b.SHA256, clean.SHA256, b.BuildInfo, clean.BuildInfo)
			}
		})
	}

	// A locked component (Build, as the kubelet is built) from the fake
	// proxy: the same with the planted toolchain as with the real one.
	t.Run("locked component", func(t *testing.T) {
		env := fakeProxyEnv(t)
		l := lockHello(t, env)
		l.GoVersion = version
		env.Toolchain = version
		b1, err := Build(ctx, env, l, "linux", runtime.GOARCH)
		must(t, err)
		defer b1.Cleanup()
		env.Go = fakeGo
		b2, err := Build(ctx, env, l, "linux", runtime.GOARCH)
		must(t, err)
		defer b2.Cleanup()
		if b1.SHA256 != b2.SHA256 {
			t.Errorf("sha256 %s with the planted go.env, want %s; build info:\n%v", b2.SHA256, b1.SHA256, b2.BuildInfo)
		}
	})
}

// TestUnpinnableSettingIsRefused: a go.env that sets GOCACHEPROG, which no
// non-empty value can switch off, stops the build.
func TestUnpinnableSettingIsRefused(t *testing.T) {
	realRoot, _ := hostGOROOT(t)
	fakeRoot, fakeGo := fakeGOROOT(t, realRoot, []string{"GOCACHEPROG=/bin/false"}, false)
	_, err := GoVersion(context.Background(), Env{Go: fakeGo, WorkDir: t.TempDir()})
	want := "sets GOCACHEPROG=/bin/false (in " + filepath.Join(fakeRoot, "go.env") + "): drover cannot override it"
	if err == nil || !strings.Contains(err.Error(), want) {
		t.Fatalf("err = %v, want %q", err, want)
	}
}
