package verify

import (
	"context"
	"os"
	"reflect"
	"strings"
	"testing"

	"github.com/drover-os/drover/image/build"
)

// fakeQCOW2 is enough of a qcow2 for verify to tell it from a raw image:
// the magic, the version, and bytes that stand for its clusters.
func fakeQCOW2() []byte {
	return append([]byte("QFI\xfb\x00\x00\x00\x03"), random(7, 4096)...)
}

func (f *provFixture) checkDigest() []Problem {
	return SignedDigest(context.Background(), f.image, f.manifest, f.m, f.pub, Expect{})
}

func TestSignedDigestAcceptsAQCOW2OnlyBuild(t *testing.T) {
	f := newOutputs(t, outputs{format: "qcow2", data: fakeQCOW2(), listed: true, subject: true})
	if format, err := Format(f.image); err != nil || format != FormatQCOW2 {
		t.Fatalf("Format = %q, %v; want qcow2", format, err)
	}
	if ps := f.checkDigest(); len(ps) != 0 {
		t.Fatalf("problems:\n%s", report(ps))
	}
	// Verify itself still refuses it, and says how to check it by digest.
	ps := Verify(f.image, f.m)
	if len(ps) != 1 || !strings.Contains(ps[0].Message, "drover verify --provenance --pub KEY.pub t.qcow2") {
		t.Fatalf("Verify of a qcow2:\n%s", report(ps))
	}
	if got, want := NotReread(f.m), []string{"gpt", "esp", "root", "root-verity"}; !reflect.DeepEqual(got, want) {
		t.Errorf("NotReread = %v, want %v", got, want)
	}
}

func TestSignedDigestFailsOnOneChangedByte(t *testing.T) {
	f := newOutputs(t, outputs{format: "qcow2", data: fakeQCOW2(), listed: true, subject: true})
	flip(t, f.image, 2000)
	ps := f.checkDigest()
	mentions(t, ps, PartImage, "sha256 of t.qcow2 is ", "the manifest's t.qcow2 has "+f.m.Images[0].SHA256)
	mentions(t, ps, PartProvenance, "subject t.qcow2 has sha256 ")
}

func TestSignedDigestFailsOnATruncatedCopy(t *testing.T) {
	f := newOutputs(t, outputs{format: "qcow2", data: fakeQCOW2(), listed: true, subject: true})
	if err := os.Truncate(f.image, 4000); err != nil {
		t.Fatal(err)
	}
	mentions(t, f.checkDigest(), PartImage, "t.qcow2 is 4000 bytes, the manifest's t.qcow2 has 4104")
}

func TestSignedDigestFailsWhenTheManifestListsNoQCOW2(t *testing.T) {
	// A signed manifest of a raw-only build: the qcow2 beside it is not one
	// of its images, even when it is a subject.
	f := newOutputs(t, outputs{format: "qcow2", data: fakeQCOW2(), subject: true})
	f.m.Images = []build.ImageFile{{Format: "raw", File: "t.raw", Size: 1, SHA256: strings.Repeat("d", 64)}}
	os.WriteFile(f.manifest, f.m.JSON(), 0o644)
	ps := f.checkDigest()
	mentions(t, ps, PartManifest, "the manifest's images list no qcow2 file (it lists: raw t.raw), so t.qcow2 cannot be checked")

	g := newOutputs(t, outputs{format: "qcow2", data: fakeQCOW2(), subject: true})
	ps = g.checkDigest()
	if len(ps) != 1 {
		t.Errorf("want only the manifest's problem:\n%s", report(ps))
	}
	mentions(t, ps, PartManifest, "the manifest's images list no qcow2 file (it lists: none)")
}

func TestSignedDigestFailsWhenTheQCOW2IsNotASubject(t *testing.T) {
	f := newOutputs(t, outputs{format: "qcow2", data: fakeQCOW2(), listed: true})
	ps := f.checkDigest()
	if len(ps) != 1 {
		t.Errorf("want only the provenance's problem:\n%s", report(ps))
	}
	mentions(t, ps, PartProvenance, f.image+" is not a subject of the signed provenance")
}

func TestSignedDigestRefusesAnotherKey(t *testing.T) {
	f := newOutputs(t, outputs{format: "qcow2", data: fakeQCOW2(), listed: true, subject: true})
	f.pub = newProvFixture(t).pub
	mentions(t, f.checkDigest(), PartProvenance, "signed by another key")
}
