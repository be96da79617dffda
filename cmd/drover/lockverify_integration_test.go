//go:build integration

package main

import (
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
)

// TestBuildRefusesForgedLinesOfTheRealLock forges base-files' line in a
// copy of recipes/minimal.yaml.lock and builds it against the configured
// mirror, trusting the keys in recipes/keys: each forgery fails with exit
// status 2 and the lock file's line, and leaves no output. drover lock
// --refresh gives base-files' line back as the signed index lists it, and
// the repaired lock passes drover fetch's same check.
func TestBuildRefusesForgedLinesOfTheRealLock(t *testing.T) {
	work := t.TempDir()
	for _, f := range []string{"minimal.yaml", "minimal.yaml.lock"} {
		data, err := os.ReadFile(filepath.Join("..", "..", "recipes", f))
		if err != nil {
			t.Fatal(err)
		}
		os.WriteFile(filepath.Join(work, f), data, 0o644)
	}
	r := filepath.Join(work, "minimal.yaml")
	honest, _ := os.ReadFile(r + ".lock")
	base := debLine(t, honest, "base-files")
	other := debLine(t, honest, "coreutils") // a real digest and size of another published file
	for _, tc := range []struct {
		name   string
		fields map[int]string
		want   string
	}{
		{"invented version", map[int]string{2: base[2] + "1", 7: strings.Replace(base[7], base[2], base[2]+"1", 1)},
			"deb base-files " + base[2] + "1 amd64: the signed trixie index (Release of "},
		{"older version with a valid-looking digest", map[int]string{2: "13.8+deb13u1", 4: other[4], 5: other[5], 7: "pool/main/b/base-files/base-files_13.8+deb13u1_amd64.deb"},
			"deb base-files 13.8+deb13u1 amd64: the signed trixie index (Release of "},
		{"changed digest", map[int]string{4: other[4], 5: other[5]},
			"deb base-files " + base[2] + " amd64: sha256 " + other[5] + ", but the signed trixie index (Release of "},
	} {
		t.Run(tc.name, func(t *testing.T) {
			forged, n := editLine(t, honest, "base-files", tc.fields)
			os.WriteFile(r+".lock", forged, 0o644)
			out := filepath.Join(t.TempDir(), "out")
			_, errOut, code := drover(t, "build", r, "-o", out)
			want := "drover: fetch: " + r + ".lock:" + strconv.Itoa(n) + ": " + tc.want
			if code != 2 || !strings.Contains(errOut, want) {
				t.Fatalf("exit %d, stderr:\n%s\nwant exit 2 and: %s", code, errOut, want)
			}
			if !strings.Contains(tc.want, "sha256") && !strings.Contains(errOut, "has no version "+tc.fields[2]+" of base-files: it has version "+base[2]+" with sha256 "+base[5]) {
				t.Errorf("the error does not say what the index has:\n%s", errOut)
			}
			if ents, _ := os.ReadDir(out); len(ents) != 0 {
				t.Errorf("a refused build left %d entries in %s", len(ents), out)
			}
		})
	}

	forged, _ := editLine(t, honest, "base-files", map[int]string{4: other[4], 5: other[5]})
	os.WriteFile(r+".lock", forged, 0o644)
	if _, errOut, code := drover(t, "lock", "--refresh", r); code != 0 {
		t.Fatalf("lock --refresh: exit %d\n%s", code, errOut)
	}
	refreshed, _ := os.ReadFile(r + ".lock")
	if got := debLine(t, refreshed, "base-files"); strings.Join(got, " ") != strings.Join(base, " ") {
		t.Errorf("after --refresh base-files is %q, want the signed index's %q", got, base)
	}
	if _, errOut, code := drover(t, "fetch", r); code != 0 {
		t.Fatalf("fetch of the refreshed lock: exit %d\n%s", code, errOut)
	}
}
