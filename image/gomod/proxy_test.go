package gomod

import (
	"archive/zip"
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"io"
	"io/fs"
	"maps"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
)

// The fake proxy serves, from a file:// GOPROXY, a miniature of the
// k8s.io/kubernetes layout: example.com/mono requires example.com/lib at the
// placeholder v0.0.0 and replaces it with ./staging/src/example.com/lib,
// while example.com/lib itself is published at v0.2.3.
var fakeModules = map[string]map[string]string{
	"example.com/mono@v1.2.3": {
		"go.mod": "module example.com/mono\n\ngo 1.22\n\nrequire example.com/lib v0.0.0\n\n" +
			"replace example.com/lib => ./staging/src/example.com/lib\n",
		"cmd/hello/main.go": "package main\n\nimport (\n\t\"fmt\"\n\n\t\"example.com/lib\"\n)\n\n" +
			"var version = \"dev\"\n\nvar extra = \"\"\n\nfunc main() { fmt.Println(lib.Greeting, version, extra) }\n",
		"cmd/hello/extra.go": "//go:build extra\n\npackage main\n\nfunc init() { extra = \"extra\" }\n",
		"util/util.go":       "// Package util is not a command.\npackage util\n\nconst X = 1\n",
	},
	"example.com/lib@v0.2.3": {
		"go.mod": "module example.com/lib\n\ngo 1.22\n",
		"lib.go": "package lib\n\nconst Greeting = \"hello\"\n",
	},
}

// fakeProxyEnv writes the fake proxy and returns an Env that uses it with a
// private module cache, no checksum database and no network.
func fakeProxyEnv(t *testing.T) Env {
	t.Helper()
	root := t.TempDir()
	proxy := filepath.Join(root, "proxy")
	for modVer, files := range fakeModules {
		mod, ver, _ := strings.Cut(modVer, "@")
		dir := filepath.Join(proxy, filepath.FromSlash(mod), "@v")
		must(t, os.MkdirAll(dir, 0o755))
		must(t, os.WriteFile(filepath.Join(dir, "list"), []byte(ver+"\n"), 0o644))
		must(t, os.WriteFile(filepath.Join(dir, ver+".info"),
			[]byte(fmt.Sprintf(`{"Version":%q,"Time":"2024-01-02T03:04:05Z"}`, ver)), 0o644))
		must(t, os.WriteFile(filepath.Join(dir, ver+".mod"), []byte(files["go.mod"]), 0o644))
		zf, err := os.Create(filepath.Join(dir, ver+".zip"))
		must(t, err)
		zw := zip.NewWriter(zf)
		for _, name := range slices.Sorted(maps.Keys(files)) {
			w, err := zw.Create(modVer + "/" + name)
			must(t, err)
			_, err = io.WriteString(w, files[name])
			must(t, err)
		}
		must(t, zw.Close())
		must(t, zf.Close())
	}
	modCache := filepath.Join(root, "modcache")
	// The module cache is read-only by design; make it removable again.
	t.Cleanup(func() {
		filepath.WalkDir(modCache, func(p string, d fs.DirEntry, err error) error {
			if err == nil && d.IsDir() {
				os.Chmod(p, 0o755)
			}
			return nil
		})
	})
	work := filepath.Join(root, "work")
	must(t, os.Mkdir(work, 0o755))
	return Env{
		WorkDir: work,
		Log:     testLog{t},
		Environ: append(os.Environ(),
			"GOPROXY=file://"+filepath.ToSlash(proxy), "GOSUMDB=off", "GONOSUMDB=", "GOPRIVATE=",
			"GOMODCACHE="+modCache),
	}
}

type testLog struct{ t *testing.T }

func (l testLog) Write(p []byte) (int, error) {
	l.t.Logf("%s", p)
	return len(p), nil
}

func must(t *testing.T, err error) {
	t.Helper()
	if err != nil {
		t.Fatal(err)
	}
}

// dirStore is an in-test BlobStore: blobs in a directory, keys in a map.
type dirStore struct {
	dir   string
	keys  map[string]string
	puts  int
	links int
}

func newDirStore(t *testing.T) *dirStore {
	return &dirStore{dir: t.TempDir(), keys: map[string]string{}}
}

func (s *dirStore) Lookup(key string) (string, bool, error) {
	sha, ok := s.keys[key]
	return sha, ok, nil
}

func (s *dirStore) Link(key, sha string) error {
	s.links++
	s.keys[key] = sha
	return nil
}

func (s *dirStore) Put(sha string, r io.Reader) (string, error) {
	s.puts++
	data, err := io.ReadAll(r)
	if err != nil {
		return "", err
	}
	if got := sha256.Sum256(data); hex.EncodeToString(got[:]) != sha {
		return "", fmt.Errorf("sha256 mismatch: want %s", sha)
	}
	return s.Path(sha), os.WriteFile(s.Path(sha), data, 0o755)
}

func (s *dirStore) Path(sha string) string { return filepath.Join(s.dir, sha) }
