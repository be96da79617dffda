package main

import (
	"context"
	"crypto/ed25519"
	"crypto/rand"
	"crypto/sha256"
	"crypto/x509"
	"encoding/hex"
	"encoding/json"
	"encoding/pem"
	"os"
	"path/filepath"
	"reflect"
	"strings"
	"testing"

	"github.com/drover-os/drover/image/attest"
	"github.com/drover-os/drover/image/build"
	"github.com/drover-os/drover/image/lock"
	"github.com/drover-os/drover/image/recipe"
)

// qcow2Outputs writes the outputs of a signed build whose recipe asks only
// for qcow2 (a stand-in qcow2: the magic and filler), and returns the
// directory and the public key.
func qcow2Outputs(t *testing.T) (dir, pub string) {
	t.Helper()
	return qcow2OutputsWith(t, nil)
}

// qcow2OutputsWith is qcow2Outputs with the manifest edited, when edit is
// set, before the provenance is made from it.
func qcow2OutputsWith(t *testing.T, edit func(*build.Manifest)) (dir, pub string) {
	t.Helper()
	dir = filepath.Join(t.TempDir(), "out")
	os.Mkdir(dir, 0o755)
	qcow2 := append([]byte("QFI\xfb\x00\x00\x00\x03"), make([]byte, 8192)...)
	for i := range qcow2[8:] {
		qcow2[8+i] = byte(i * 7)
	}
	digest := func(b []byte) string { s := sha256.Sum256(b); return hex.EncodeToString(s[:]) }
	m := &build.Manifest{Schema: manifestSchema, Name: "t", BuildID: "0123456789abcdef", Builder: "drover test", RecipeSHA256: strings.Repeat("a", 64), LockSHA256: strings.Repeat("b", 64),
		RootHash: strings.Repeat("e", 64), DiskSize: 1 << 30,
		Partitions: []build.Partition{{Index: 1, Name: "esp"}, {Index: 2, Name: "root"}, {Index: 3, Name: "root-verity"}},
		ESP:        []build.ESPFile{{Path: "EFI/BOOT/BOOTX64.EFI"}, {Path: "EFI/Linux/drover.efi"}},
		Images:     []build.ImageFile{{Format: "qcow2", File: "t.qcow2", Size: int64(len(qcow2)), SHA256: digest(qcow2)}}}
	if edit != nil {
		edit(m)
	}
	files := map[string][]byte{"t.qcow2": qcow2, "t.manifest.json": m.JSON(), "t.spdx.json": []byte("{}")}
	var subjects []build.Subject
	for _, n := range []string{"t.qcow2", "t.manifest.json", "t.spdx.json"} {
		os.WriteFile(filepath.Join(dir, n), files[n], 0o644)
		subjects = append(subjects, build.Subject{Name: n, SHA256: digest(files[n])})
	}
	st, err := build.Provenance(m, subjects)
	if err != nil {
		t.Fatal(err)
	}
	pubKey, privKey, _ := ed25519.GenerateKey(rand.Reader)
	privDER, _ := x509.MarshalPKCS8PrivateKey(privKey)
	pubDER, _ := x509.MarshalPKIXPublicKey(pubKey)
	priv, pub := filepath.Join(dir, "..", "sign.pem"), filepath.Join(dir, "..", "sign.pub")
	os.WriteFile(priv, pem.EncodeToMemory(&pem.Block{Type: "PRIVATE KEY", Bytes: privDER}), 0o600)
	os.WriteFile(pub, pem.EncodeToMemory(&pem.Block{Type: "PUBLIC KEY", Bytes: pubDER}), 0o644)
	signer, err := attest.LoadSigner(priv)
	if err != nil {
		t.Fatal(err)
	}
	env, err := attest.Sign(context.Background(), st, signer)
	if err != nil {
		t.Fatal(err)
	}
	os.WriteFile(filepath.Join(dir, "t"+build.ProvenanceSuffix), st, 0o644)
	os.WriteFile(filepath.Join(dir, "t"+build.EnvelopeSuffix), env, 0o644)
	return dir, pub
}

// TestVerifyQCOW2ByDigest: a qcow2-only build verifies with --provenance,
// the output says what was not re-read, and a changed byte fails.
func TestVerifyQCOW2ByDigest(t *testing.T) {
	dir, pub := qcow2Outputs(t)
	img, manifest := filepath.Join(dir, "t.qcow2"), filepath.Join(dir, "t.manifest.json")
	stdout, errOut, code := drover(t, "verify", "--provenance", "--pub", pub, img)
	copyPath := filepath.Join(dir, "t-copy.raw")
	want := img + " verifies against t.manifest.json by its digest: image sha256 and size, signed provenance and its subjects\n" +
		"not re-read: the GPT, 3 partitions, the dm-verity tree (root hash " + strings.Repeat("e", 64) + ") and 2 ESP files inside t.qcow2: " +
		"a qcow2 is not read in place, only its sha256 vouches for them; to re-read them, convert it to raw: qemu-img convert -O raw " + img + " " + copyPath +
		" && drover verify --manifest " + manifest + " " + copyPath + "\n"
	if code != 0 || stdout != want {
		t.Fatalf("exit %d, want 0; stdout:\n%s\nwant:\n%s\nstderr: %s", code, stdout, want, errOut)
	}
	t.Logf("%s", stdout)

	stdout, _, code = drover(t, "verify", "--json", "--provenance", "--pub", pub, img)
	var res struct {
		OK        bool
		Problems  []any
		NotReread []string
	}
	if err := json.Unmarshal([]byte(stdout), &res); err != nil || code != 0 || !res.OK || len(res.Problems) != 0 ||
		!reflect.DeepEqual(res.NotReread, []string{"gpt", "esp", "root", "root-verity"}) {
		t.Errorf("--json: exit %d, %v:\n%s", code, err, stdout)
	}

	// Without --provenance there is nothing to trust the manifest's digest
	// by: refused as before, pointing at --provenance.
	stdout, _, code = drover(t, "verify", img)
	if code != 1 || !strings.Contains(stdout, "image: t.qcow2 is a qcow2 image") || !strings.Contains(stdout, "drover verify --provenance --pub KEY.pub t.qcow2") {
		t.Errorf("without --provenance: exit %d, want 1 and the refusal:\n%s", code, stdout)
	}
	t.Logf("%s", stdout)

	data, _ := os.ReadFile(img)
	data[4000] ^= 1
	os.WriteFile(img, data, 0o644)
	stdout, _, code = drover(t, "verify", "--provenance", "--pub", pub, img)
	for _, line := range []string{"image: sha256 of t.qcow2 is ", "provenance: subject t.qcow2 has sha256 ", img + " does not verify against t.manifest.json: 2 problems (image, provenance)"} {
		if code != 1 || !strings.Contains(stdout, line) {
			t.Errorf("one byte changed: exit %d, want 1 and a line containing %q:\n%s", code, line, stdout)
		}
	}
	t.Logf("%s", stdout)
	if strings.Contains(stdout, "not re-read") {
		t.Errorf("a failed check still prints the not-re-read note:\n%s", stdout)
	}
}

// TestVerifyTextWholeFile: the success line claims the image's sha256 only
// when the manifest has one for the file's format; a raw copy of a
// qcow2-only build is checked part by part, not as a whole.
func TestVerifyTextWholeFile(t *testing.T) {
	for _, c := range []struct {
		whole bool
		want  string
	}{
		{true, "copy.raw verifies against t.manifest.json: image sha256, GPT, 3 partitions, dm-verity root hash r, 0 ESP files\n"},
		{false, "copy.raw verifies against t.manifest.json: (no digest of the file as a whole: the manifest lists no raw image) GPT, 3 partitions, dm-verity root hash r, 0 ESP files\n"},
	} {
		m := &build.Manifest{RootHash: "r", Partitions: make([]build.Partition, 3),
			Images: []build.ImageFile{{Format: "qcow2", File: "t.qcow2"}}}
		if c.whole {
			m.Images = append(m.Images, build.ImageFile{Format: "raw", File: "t.raw"})
		}
		var b strings.Builder
		if err := verifyText(&b, verifyResult{image: "copy.raw", manifest: "out/t.manifest.json", m: m, format: "raw"}); err != nil {
			t.Fatal(err)
		}
		if b.String() != c.want {
			t.Errorf("wholeFile %v:\n got %q\nwant %q", c.whole, b.String(), c.want)
		}
	}
}

// TestVerifyExpectations: --expect-lock, --expect-recipe and
// --expect-builder hold the signed provenance to the lock, recipe and
// builder the caller names; a mismatch names the field and the flag, and
// the flags without --provenance are a usage error.
func TestVerifyExpectations(t *testing.T) {
	const lockPath, recipePath, otherLock = "../../recipes/minimal.yaml.lock", "../../recipes/minimal.yaml", "../../recipes/ecs-node.yaml.lock"
	l, err := lock.Read(lockPath)
	if err != nil {
		t.Fatal(err)
	}
	r, err := recipe.Load(recipePath)
	if err != nil {
		t.Fatal(err)
	}
	ol, err := lock.Read(otherLock)
	if err != nil {
		t.Fatal(err)
	}
	dir, pub := qcow2OutputsWith(t, func(m *build.Manifest) { m.LockSHA256, m.RecipeSHA256 = build.LockSHA256(l), r.Digest() })
	img := filepath.Join(dir, "t.qcow2")

	stdout, errOut, code := drover(t, "verify", "--provenance", "--pub", pub, "--expect-lock", lockPath, "--expect-recipe", recipePath, "--expect-builder", build.BuilderID, img)
	if code != 0 {
		t.Errorf("the lock, recipe and builder built from: exit %d\n%s%s", code, stdout, errOut)
	}
	for _, tc := range []struct {
		args []string
		want string
	}{
		{[]string{"--expect-lock", otherLock}, "provenance: predicate.buildDefinition.resolvedDependencies: lock sha256 " + build.LockSHA256(l) + ", want " + build.LockSHA256(ol) + " (from --expect-lock " + otherLock + ")"},
		{[]string{"--expect-recipe", "../../recipes/ecs-node.yaml"}, "provenance: predicate.buildDefinition.resolvedDependencies: recipe sha256 " + r.Digest() + ", want "},
		{[]string{"--expect-builder", "https://ci.example.com/drover"}, `provenance: predicate.runDetails.builder.id is "` + build.BuilderID + `", want "https://ci.example.com/drover" (from --expect-builder)`},
	} {
		stdout, _, code := drover(t, append(append([]string{"verify", "--provenance", "--pub", pub}, tc.args...), img)...)
		if code != 1 || !strings.Contains(stdout, tc.want) {
			t.Errorf("%v: exit %d, want 1 and %q:\n%s", tc.args, code, tc.want, stdout)
		}
	}
	if _, errOut, code := drover(t, "verify", "--expect-lock", lockPath, img); code != 2 || !strings.Contains(errOut, "--expect-lock is checked against the signed provenance: add --provenance --pub KEY.pub") {
		t.Errorf("--expect-lock without --provenance: exit %d, want 2:\n%s", code, errOut)
	}
}
