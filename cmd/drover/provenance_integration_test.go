//go:build integration

package main

import (
	"bytes"
	"encoding/base64"
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	cdx "github.com/CycloneDX/cyclonedx-go"
	spdxjson "github.com/spdx/tools-golang/json"
	"github.com/spdx/tools-golang/spdx"
	"github.com/spdx/tools-golang/spdx/v2/common"
	"github.com/spdx/tools-golang/spdxlib"

	"github.com/drover-os/drover/image/build"
)

// signedBuild builds recipes/minimal.yaml into a temp dir, signing the
// provenance with an Ed25519 key openssl made, and returns the output
// directory and the public key. drover-agent and drover-init are built from
// this checkout (the test's working directory is in it).
func signedBuild(t *testing.T) (out, pub string) {
	t.Helper()
	work := t.TempDir()
	priv, pub := filepath.Join(work, "sign.pem"), filepath.Join(work, "sign.pub")
	for _, args := range [][]string{{"genpkey", "-algorithm", "ed25519", "-out", priv}, {"pkey", "-in", priv, "-pubout", "-out", pub}} {
		if b, err := exec.Command("openssl", args...).CombinedOutput(); err != nil {
			t.Fatalf("openssl %s: %v\n%s", args[0], err, b)
		}
	}
	for _, f := range []string{"minimal.yaml", "minimal.yaml.lock"} {
		data, err := os.ReadFile(filepath.Join("..", "..", "recipes", f))
		if err != nil {
			t.Fatal(err)
		}
		os.WriteFile(filepath.Join(work, f), data, 0o644)
	}
	out = filepath.Join(work, "out")
	_, errOut, code := drover(t, "build", filepath.Join(work, "minimal.yaml"), "-o", out, "--sign-key", priv, "-q")
	if code != 0 {
		t.Fatalf("signed build failed (exit %d):\n%s", code, errOut)
	}
	return out, pub
}

// TestSignedProvenance: drover verify --provenance accepts a signed build
// and fails when one byte of the envelope, of the statement or of an image
// file changes; openssl verifies the envelope's signature over the DSSE PAE.
func TestSignedProvenance(t *testing.T) {
	out, pub := signedBuild(t)
	raw := filepath.Join(out, "minimal.raw")
	verifyArgs := []string{"verify", "--provenance", "--pub", pub, raw}
	stdout, errOut, code := drover(t, verifyArgs...)
	if code != 0 || !strings.Contains(stdout, "signed provenance and its subjects") {
		t.Fatalf("verify of the signed build: exit %d\n%s%s", code, stdout, errOut)
	}
	t.Logf("%s", strings.TrimSpace(stdout))

	// The signature, checked by openssl over the PAE the DSSE spec defines.
	envData, _ := os.ReadFile(filepath.Join(out, "minimal"+build.EnvelopeSuffix))
	var env struct {
		PayloadType, Payload string
		Signatures           []struct{ Sig string }
	}
	if err := json.Unmarshal(envData, &env); err != nil || len(env.Signatures) != 1 {
		t.Fatalf("envelope: %v %s", err, envData)
	}
	payload, _ := base64.StdEncoding.DecodeString(env.Payload)
	sig, _ := base64.StdEncoding.DecodeString(env.Signatures[0].Sig)
	pae, sigPath := filepath.Join(t.TempDir(), "pae"), filepath.Join(t.TempDir(), "sig")
	os.WriteFile(pae, []byte(fmt.Sprintf("DSSEv1 %d %s %d %s", len(env.PayloadType), env.PayloadType, len(payload), payload)), 0o644)
	os.WriteFile(sigPath, sig, 0o644)
	if b, err := exec.Command("openssl", "pkeyutl", "-verify", "-pubin", "-inkey", pub, "-rawin", "-in", pae, "-sigfile", sigPath).CombinedOutput(); err != nil {
		t.Fatalf("openssl does not verify the build's provenance signature: %v\n%s", err, b)
	} else {
		t.Logf("openssl: %s", strings.TrimSpace(string(b)))
	}
	if stmt, _ := os.ReadFile(filepath.Join(out, "minimal"+build.ProvenanceSuffix)); string(stmt) != string(payload) {
		t.Error("the unsigned statement is not the signed payload")
	}

	t.Run("sbom", func(t *testing.T) { checkMinimalSBOM(t, filepath.Join(out, "minimal.spdx.json")) })
	t.Run("cyclonedx", func(t *testing.T) {
		data, err := os.ReadFile(filepath.Join(out, "minimal.cdx.json"))
		if err != nil {
			t.Fatal(err)
		}
		var bom cdx.BOM
		if err := cdx.NewBOMDecoder(bytes.NewReader(data), cdx.BOMFileFormatJSON).Decode(&bom); err != nil || bom.SpecVersion != cdx.SpecVersion1_6 {
			t.Fatalf("the CycloneDX library reads minimal.cdx.json as spec %v: %v", bom.SpecVersion, err)
		}
		found := false
		for _, c := range *bom.Components {
			found = found || c.Name == "github.com/coreos/ignition/v2"
		}
		if !found {
			t.Error("minimal.cdx.json lacks drover-agent's module github.com/coreos/ignition/v2")
		}
	})
	t.Run("drover binaries built from the checkout", func(t *testing.T) {
		m, err := loadManifest(filepath.Join(out, "minimal.manifest.json"))
		if err != nil {
			t.Fatal(err)
		}
		if len(m.Own) != 2 {
			t.Fatalf("manifest lists %d drover binaries", len(m.Own))
		}
		for _, o := range m.Own {
			if o.Built != "source" || o.Source == nil || o.Source.Module != build.DroverModule || len(o.Source.Commit) != 40 || o.GoVersion == "" {
				t.Errorf("%s: built %q, source %+v, toolchain %q", o.Path, o.Built, o.Source, o.GoVersion)
			}
		}
		t.Logf("drover-agent: sha256 %s from %s@%s state=%s with %s", m.Own[0].SHA256, m.Own[0].Source.Module, m.Own[0].Source.Commit, m.Own[0].Source.State, m.Own[0].GoVersion)
	})

	for _, tc := range []struct {
		file string
		off  func(size int64) int64
		want string
	}{
		{"minimal" + build.EnvelopeSuffix, func(n int64) int64 { return n / 2 }, "provenance: " + filepath.Join(out, "minimal"+build.EnvelopeSuffix) + ": DSSE envelope signature does not verify"},
		{"minimal" + build.ProvenanceSuffix, func(n int64) int64 { return n / 2 }, "provenance: " + filepath.Join(out, "minimal"+build.ProvenanceSuffix) + " differs from the statement signed"},
		{"minimal.raw", func(n int64) int64 { return n - 4096 }, "provenance: subject minimal.raw has sha256 "},
	} {
		t.Run(tc.file, func(t *testing.T) {
			p := filepath.Join(out, tc.file)
			fi, err := os.Stat(p)
			if err != nil {
				t.Fatal(err)
			}
			off := tc.off(fi.Size())
			flipByte(t, p, off)
			defer flipByte(t, p, off)
			stdout, errOut, code := drover(t, verifyArgs...)
			if code != 1 || !strings.Contains(stdout, tc.want) {
				t.Fatalf("one byte changed at %d: exit %d, want 1 and a line containing %q:\n%s%s", off, code, tc.want, stdout, errOut)
			}
		})
	}
	if stdout, errOut, code := drover(t, verifyArgs...); code != 0 {
		t.Fatalf("after restoring every byte: exit %d\n%s%s", code, stdout, errOut)
	}
	// The qcow2 the build wrote beside the raw, checked by its digest as a
	// qcow2-only build is (no second build: the checks are the same).
	t.Run("minimal.qcow2", func(t *testing.T) {
		qcow2 := filepath.Join(out, "minimal.qcow2")
		stdout, errOut, code := drover(t, "verify", "--provenance", "--pub", pub, qcow2)
		if code != 0 || !strings.Contains(stdout, "verifies against minimal.manifest.json by its digest") || !strings.Contains(stdout, "not re-read: the GPT, 3 partitions") {
			t.Fatalf("verify --provenance of the qcow2: exit %d\n%s%s", code, stdout, errOut)
		}
		t.Logf("%s", strings.TrimSpace(stdout))
		fi, err := os.Stat(qcow2)
		if err != nil {
			t.Fatal(err)
		}
		off := fi.Size() - 1024
		flipByte(t, qcow2, off)
		defer flipByte(t, qcow2, off)
		stdout, errOut, code = drover(t, "verify", "--provenance", "--pub", pub, qcow2)
		for _, want := range []string{"image: sha256 of minimal.qcow2 is ", "provenance: subject minimal.qcow2 has sha256 "} {
			if code != 1 || !strings.Contains(stdout, want) {
				t.Errorf("one byte of the qcow2 changed at %d: exit %d, want 1 and a line containing %q:\n%s%s", off, code, want, stdout, errOut)
			}
		}
	})
	if _, errOut, code := drover(t, "verify", "--provenance", raw); code != 2 || !strings.Contains(errOut, "--provenance needs --pub") {
		t.Errorf("--provenance without --pub: exit %d %s", code, errOut)
	}
}

// checkMinimalSBOM reads the SBOM with the SPDX library, validates it, and
// checks what the real packages and binaries put in it: a source package
// and a license from a .deb, drover-agent's modules with their go.sum hash.
func checkMinimalSBOM(t *testing.T, path string) {
	data, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	doc, err := spdxjson.Read(bytes.NewReader(data))
	if err != nil {
		t.Fatalf("the SPDX library cannot read %s: %v", path, err)
	}
	if err := spdxlib.ValidateDocument(doc); err != nil {
		t.Fatalf("the SPDX library's validator refuses %s: %v", path, err)
	}
	pkgs := map[string]*spdx.Package{}
	names := map[common.ElementID]string{}
	for _, p := range doc.Packages {
		pkgs[p.PackageName] = p
		names[p.PackageSPDXIdentifier] = p.PackageName
	}
	if p := pkgs["libc6"]; p == nil || !strings.HasPrefix(p.PackageSourceInfo, "built package from: glibc ") || len(p.PackageChecksums) != 1 {
		t.Errorf("libc6: %+v", p)
	} else {
		t.Logf("libc6: %s; license %s (%s)", p.PackageSourceInfo, p.PackageLicenseDeclared, p.PackageLicenseComments)
	}
	withLicense := 0
	for _, p := range doc.Packages {
		if p.PackageLicenseDeclared != "NOASSERTION" {
			withLicense++
		}
	}
	ign := pkgs["github.com/coreos/ignition/v2"]
	if ign == nil || !strings.HasPrefix(ign.PackageVersion, "v2.") || !strings.HasPrefix(ign.PackageComment, "go.sum h1:") {
		t.Fatalf("drover-agent's module github.com/coreos/ignition/v2 is missing or incomplete: %+v", ign)
	}
	rels := map[string]bool{}
	for _, r := range doc.Relationships {
		rels[names[r.RefA.ElementRefID]+" "+r.Relationship+" "+names[r.RefB.ElementRefID]] = true
	}
	// The Debian packages hang off the operating system (debian 13), as
	// scanners expect, and the image contains it.
	for _, want := range []string{"minimal CONTAINS drover-agent", "minimal CONTAINS drover-init", "minimal CONTAINS debian", "debian CONTAINS libc6",
		"drover-agent DEPENDS_ON github.com/coreos/ignition/v2", "systemd DEPENDS_ON libc6"} {
		if !rels[want] {
			t.Errorf("SBOM lacks the relationship %q", want)
		}
	}
	t.Logf("SBOM: %d packages (%d with a declared license), %d relationships; ignition %s %s", len(doc.Packages), withLicense, len(doc.Relationships), ign.PackageVersion, ign.PackageComment)
}
