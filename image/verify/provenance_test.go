package verify

import (
	"context"
	"crypto/ed25519"
	"crypto/rand"
	"crypto/x509"
	"encoding/json"
	"encoding/pem"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/secure-systems-lab/go-securesystemslib/dsse"

	"github.com/drover-os/drover/image/attest"
	"github.com/drover-os/drover/image/build"
)

// provFixture is a build's output directory: an image, its manifest and
// SBOM, the provenance statement and its signed envelope.
type provFixture struct {
	dir, image, manifest string
	pub                  dsse.Verifier
	m                    *build.Manifest
	want                 Expect // what check expects of the predicate
}

func writePEM(t *testing.T, path, typ string, der []byte) {
	t.Helper()
	if err := os.WriteFile(path, pem.EncodeToMemory(&pem.Block{Type: typ, Bytes: der}), 0o600); err != nil {
		t.Fatal(err)
	}
}

func newProvFixture(t *testing.T) *provFixture {
	return newOutputs(t, outputs{format: "raw", data: []byte("disk image bytes"), subject: true})
}

// outputs says what newOutputs writes: the image t.<format> with data, an
// entry for it in the manifest's images when listed, and the image among
// the signed subjects when subject.
type outputs struct {
	format          string
	data            []byte
	listed, subject bool
	// edit, when set, changes the statement before it is signed.
	edit func(st []byte) []byte
}

func newOutputs(t *testing.T, o outputs) *provFixture {
	t.Helper()
	dir := t.TempDir()
	imageName := "t." + o.format
	f := &provFixture{dir: dir, image: filepath.Join(dir, imageName), manifest: filepath.Join(dir, "t.manifest.json")}
	f.m = &build.Manifest{Name: "t", BuildID: "0123456789abcdef", Builder: "drover test", RecipeSHA256: strings.Repeat("a", 64), LockSHA256: strings.Repeat("b", 64),
		Packages: []build.Package{{Name: "libc6", Version: "2.41-12", Arch: "amd64", SHA256: strings.Repeat("c", 64)}},
		Go: []build.GoComponent{{Name: "kubelet", GoVersion: "go1.26.8",
			Deps: []string{"github.com/google/cadvisor@v0.52.1 h1:sC8SZ6jio9ds+P2dk51bgbeYeufxo55n0X3tmrpA9as="}}},
		Partitions: []build.Partition{{Index: 1, Name: "esp"}, {Index: 2, Name: "root"}, {Index: 3, Name: "root-verity"}}}
	os.WriteFile(f.image, o.data, 0o644)
	if o.listed {
		f.m.Images = []build.ImageFile{{Format: o.format, File: imageName, Size: int64(len(o.data)), SHA256: sum(o.data)}}
	}
	os.WriteFile(f.manifest, f.m.JSON(), 0o644)
	os.WriteFile(filepath.Join(dir, "t.spdx.json"), []byte("{}"), 0o644)
	names := []string{"t.manifest.json", "t.spdx.json"}
	if o.subject {
		names = append([]string{imageName}, names...)
	}
	var subjects []build.Subject
	for _, n := range names {
		s, _, err := build.FileSHA256(filepath.Join(dir, n))
		if err != nil {
			t.Fatal(err)
		}
		subjects = append(subjects, build.Subject{Name: n, SHA256: s})
	}
	st, err := build.Provenance(f.m, subjects)
	if err != nil {
		t.Fatal(err)
	}
	if o.edit != nil {
		st = o.edit(st)
	}
	pub, priv, _ := ed25519.GenerateKey(rand.Reader)
	der, _ := x509.MarshalPKCS8PrivateKey(priv)
	pubDER, _ := x509.MarshalPKIXPublicKey(pub)
	writePEM(t, filepath.Join(dir, "..", "key.pem"), "PRIVATE KEY", der)
	writePEM(t, filepath.Join(dir, "..", "key.pub"), "PUBLIC KEY", pubDER)
	s, err := attest.LoadSigner(filepath.Join(dir, "..", "key.pem"))
	if err != nil {
		t.Fatal(err)
	}
	if f.pub, err = attest.LoadVerifier(filepath.Join(dir, "..", "key.pub")); err != nil {
		t.Fatal(err)
	}
	env, err := attest.Sign(context.Background(), st, s)
	if err != nil {
		t.Fatal(err)
	}
	os.WriteFile(filepath.Join(dir, "t"+build.ProvenanceSuffix), st, 0o644)
	os.WriteFile(filepath.Join(dir, "t"+build.EnvelopeSuffix), env, 0o644)
	return f
}

func (f *provFixture) check() []Problem {
	return Provenance(context.Background(), f.image, f.manifest, f.m, f.pub, f.want)
}

// flip changes one byte in the middle of the file (or at off when >= 0).
func flip(t *testing.T, path string, off int) {
	t.Helper()
	data, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	if off < 0 {
		off = len(data) / 2
	}
	data[off] ^= 0x01
	os.WriteFile(path, data, 0o644)
}

func TestProvenanceAcceptsASignedBuild(t *testing.T) {
	f := newProvFixture(t)
	if ps := f.check(); len(ps) != 0 {
		t.Fatalf("problems: %v", ps)
	}
	// The statement carries the Go module's go.sum hash as its digest, not a binary's.
	st, _ := os.ReadFile(filepath.Join(f.dir, "t"+build.ProvenanceSuffix))
	var doc struct {
		Predicate struct {
			BuildDefinition struct {
				ResolvedDependencies []struct {
					URI    string            `json:"uri"`
					Digest map[string]string `json:"digest"`
				} `json:"resolvedDependencies"`
			} `json:"buildDefinition"`
		} `json:"predicate"`
	}
	if err := json.Unmarshal(st, &doc); err != nil {
		t.Fatal(err)
	}
	found := false
	for _, d := range doc.Predicate.BuildDefinition.ResolvedDependencies {
		if d.URI == "pkg:golang/github.com/google/cadvisor@v0.52.1" {
			found = true
			// h1:sC8SZ6jio9ds+P2dk51bgbeYeufxo55n0X3tmrpA9as= in hex
			if d.Digest["dirHash"] != "b02f1267a8e2a3d76cf8fd9d939d5b81b7987ae7f1a39e67d17ded9aba40f5ab" || len(d.Digest) != 1 {
				t.Errorf("cadvisor digest = %v", d.Digest)
			}
		}
	}
	if !found {
		t.Errorf("cadvisor is not a resolved dependency:\n%s", st)
	}
}

func TestProvenanceFailsOnOneChangedByte(t *testing.T) {
	for _, tc := range []struct {
		file string
		off  int // -1: the middle
		want string
	}{
		{"t" + build.EnvelopeSuffix, -1, "signature does not verify"},
		{"t" + build.ProvenanceSuffix, -1, "differs from the statement signed in t.provenance.dsse.json"},
		{"t.raw", 0, "subject t.raw has sha256 "},
		{"t.manifest.json", -1, "subject t.manifest.json has sha256 "},
		{"t.spdx.json", 0, "subject t.spdx.json has sha256 "},
	} {
		t.Run(tc.file, func(t *testing.T) {
			f := newProvFixture(t)
			flip(t, filepath.Join(f.dir, tc.file), tc.off)
			ps := f.check()
			if len(ps) == 0 {
				t.Fatal("a changed byte was not noticed")
			}
			if ps[0].Part != PartProvenance || !strings.Contains(ps[0].Message, tc.want) {
				t.Errorf("problems %v, want one containing %q", ps, tc.want)
			}
		})
	}
}

func TestProvenanceRefusesAnotherKeyAndMissingEnvelope(t *testing.T) {
	f := newProvFixture(t)
	other := newProvFixture(t)
	f.pub = other.pub
	if ps := f.check(); len(ps) != 1 || !strings.Contains(ps[0].Message, "signed by another key") {
		t.Errorf("another key: %v", ps)
	}
	os.Remove(filepath.Join(f.dir, "t"+build.EnvelopeSuffix))
	if ps := f.check(); len(ps) != 1 || !strings.Contains(ps[0].Message, "build with --sign-key") {
		t.Errorf("no envelope: %v", ps)
	}
}

// TestProvenanceChecksWhatItSays: a signed statement is not enough; it must
// be drover's build type and builder, and record the lock and recipe the
// caller expects, each problem naming the field and where the expected
// value came from.
func TestProvenanceChecksWhatItSays(t *testing.T) {
	replace := func(old, new string) func([]byte) []byte {
		return func(st []byte) []byte {
			if !strings.Contains(string(st), old) {
				t.Fatalf("statement has no %q to replace", old)
			}
			return []byte(strings.ReplaceAll(string(st), old, new))
		}
	}
	lockOf := func(c string) *Digest { return &Digest{SHA256: strings.Repeat(c, 64), From: "recipes/t.yaml.lock"} }
	for _, tc := range []struct {
		name string
		edit func([]byte) []byte
		want Expect
		msgs []string // "": no problem
	}{
		{"as built", nil, Expect{}, nil},
		{"expected lock, recipe and builder", nil, Expect{BuilderID: build.BuilderID, Lock: lockOf("b"), Recipe: &Digest{SHA256: strings.Repeat("a", 64), From: "recipes/t.yaml"}}, nil},
		{"another build type", replace(build.BuildType, "https://example.com/other/v1"), Expect{},
			[]string{`predicate.buildDefinition.buildType is "https://example.com/other/v1", want "` + build.BuildType + `"`}},
		{"another builder", replace(build.BuilderID, "https://example.com/builder"), Expect{},
			[]string{`predicate.runDetails.builder.id is "https://example.com/builder", want "` + build.BuilderID + `" (drover's)`}},
		{"not the expected builder", nil, Expect{BuilderID: "https://ci.example.com/drover"},
			[]string{`predicate.runDetails.builder.id is "` + build.BuilderID + `", want "https://ci.example.com/drover" (from --expect-builder)`}},
		{"another lock", nil, Expect{Lock: lockOf("d")}, []string{
			"predicate.buildDefinition.resolvedDependencies: lock sha256 " + strings.Repeat("b", 64) + ", want " + strings.Repeat("d", 64) + " (from --expect-lock recipes/t.yaml.lock)",
			"predicate.buildDefinition.externalParameters.lock.sha256 is \"" + strings.Repeat("b", 64) + "\", want " + strings.Repeat("d", 64)}},
		{"another recipe", nil, Expect{Recipe: &Digest{SHA256: strings.Repeat("e", 64), From: "r.yaml"}}, []string{
			"predicate.buildDefinition.resolvedDependencies: recipe sha256 " + strings.Repeat("a", 64) + ", want " + strings.Repeat("e", 64) + " (from --expect-recipe r.yaml)",
			"predicate.buildDefinition.externalParameters.recipe.sha256"}},
		{"no lock recorded", replace(`"name": "lock"`, `"name": "lock file"`), Expect{Lock: lockOf("b")},
			[]string{"predicate.buildDefinition.resolvedDependencies: no lock entry, want lock sha256 " + strings.Repeat("b", 64) + " (from --expect-lock recipes/t.yaml.lock)"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			f := newOutputs(t, outputs{format: "raw", data: []byte("disk image bytes"), subject: true, edit: tc.edit})
			f.want = tc.want
			ps := f.check()
			if len(ps) != len(tc.msgs) {
				t.Fatalf("problems %v, want %d: %q", ps, len(tc.msgs), tc.msgs)
			}
			for i, p := range ps {
				if p.Part != PartProvenance || !strings.HasPrefix(p.Message, tc.msgs[i]) {
					t.Errorf("problem %d: %s: %s\nwant prefix %s", i, p.Part, p.Message, tc.msgs[i])
				}
			}
		})
	}
}
