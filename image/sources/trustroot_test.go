package sources

import (
	"crypto/sha256"
	"encoding/hex"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/drover-os/drover/image/recipe"
)

// TestTrustRootChoice: --keyring (recorded by content), else the recipe's
// keyring (relative to the recipe, recorded as written), else the keys in
// the repository; each unreadable keyring is named with where it came from.
func TestTrustRootChoice(t *testing.T) {
	e := newEnv(t)
	data, err := os.ReadFile(e.archive.KeyringPath)
	if err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(e.dir, "archive.gpg"), data, 0o644); err != nil {
		t.Fatal(err)
	}
	sum := sha256.Sum256(data)
	fp := e.archive.Fingerprint()
	inRepo := &recipe.Recipe{Path: "r.yaml", Dir: e.dir}
	relative := &recipe.Recipe{Path: "r.yaml", Dir: e.dir, Debian: recipe.Debian{Keyring: "archive.gpg"}}
	absolute := &recipe.Recipe{Path: "r.yaml", Dir: "/nonexistent", Debian: recipe.Debian{Keyring: filepath.Join(e.dir, "archive.gpg")}}
	for _, tc := range []struct {
		name          string
		keyring       string
		r             *recipe.Recipe
		source, label string
		signedByTest  bool
	}{
		{"--keyring", e.archive.KeyringPath, relative, "override:sha256:" + hex.EncodeToString(sum[:]), e.archive.KeyringPath + " (--keyring)", true},
		{"recipe, relative", "", relative, "recipe:archive.gpg", filepath.Join(e.dir, "archive.gpg") + " (the recipe's debian.keyring)", true},
		{"recipe, absolute", "", absolute, "recipe:" + filepath.Join(e.dir, "archive.gpg"), filepath.Join(e.dir, "archive.gpg") + " (the recipe's debian.keyring)", true},
		{"repository", "", inRepo, "repo:recipes/keys/debian-archive-trixie.asc", "recipes/keys/debian-archive-trixie.asc", false},
	} {
		o := Options{Keyring: tc.keyring}
		tr, err := o.TrustRoot(tc.r, "trixie")
		if err != nil {
			t.Errorf("%s: %v", tc.name, err)
			continue
		}
		if tr.Source != tc.source || tr.Name != tc.label {
			t.Errorf("%s: source %q, name %q; want %q, %q", tc.name, tr.Source, tr.Name, tc.source, tc.label)
		}
		// Fingerprints are compared whatever their case.
		if tr.Has(fp) != tc.signedByTest || tr.Has(strings.ToLower(fp)) != tc.signedByTest {
			t.Errorf("%s: Has(test key) = %v, want %v", tc.name, tr.Has(fp), tc.signedByTest)
		}
	}

	bad := filepath.Join(e.dir, "bad.gpg")
	if err := os.WriteFile(bad, []byte("not a keyring"), 0o644); err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		name, keyring string
		r             *recipe.Recipe
		suite, want   string
	}{
		{"missing --keyring", filepath.Join(e.dir, "nothere.gpg"), inRepo, "trixie", "reading keyring " + filepath.Join(e.dir, "nothere.gpg") + " (--keyring): "},
		{"bad --keyring", bad, inRepo, "trixie", "reading keyring " + bad + " (--keyring): "},
		{"missing recipe keyring", "", &recipe.Recipe{Path: "r.yaml", Dir: e.dir, Debian: recipe.Debian{Keyring: "nothere.gpg"}}, "trixie", "r.yaml: debian.keyring: "},
		{"no repository keys for the suite", "", inRepo, "sid-frobnicated", `no trust root for Debian suite "sid-frobnicated"`},
	} {
		o := Options{Keyring: tc.keyring}
		if _, err := o.TrustRoot(tc.r, tc.suite); err == nil || !strings.HasPrefix(err.Error(), tc.want) {
			t.Errorf("%s: error %v, want it to begin %q", tc.name, err, tc.want)
		}
	}
}
