package verify

import (
	"bytes"
	"context"
	"fmt"
	"os"
	"path/filepath"

	intoto "github.com/in-toto/attestation/go/v1"
	"github.com/secure-systems-lab/go-securesystemslib/dsse"
	"google.golang.org/protobuf/encoding/protojson"

	"github.com/drover-os/drover/image/attest"
	"github.com/drover-os/drover/image/build"
)

// PartProvenance is the part a provenance problem is in.
const PartProvenance = "provenance"

// Provenance checks the signed provenance beside imagePath
// (<name>.provenance.dsse.json) with the public key v: the DSSE signature,
// that the unsigned statement beside it is the signed one byte for byte,
// that the statement is a valid in-toto Statement with an SLSA v1
// provenance predicate, and that every subject's file beside the image has
// the sha256 it names — including the image itself and manifestPath, so a
// manifest swapped for another cannot pass Verify either.
func Provenance(ctx context.Context, imagePath, manifestPath string, m *build.Manifest, v dsse.Verifier) []Problem {
	dir := filepath.Dir(imagePath)
	envPath := filepath.Join(dir, m.Name+build.EnvelopeSuffix)
	var ps []Problem
	add := func(format string, args ...any) {
		ps = append(ps, Problem{PartProvenance, fmt.Sprintf(format, args...)})
	}
	env, err := os.ReadFile(envPath)
	if err != nil {
		add("reading %s: %v: build with --sign-key to sign the provenance", envPath, err)
		return ps
	}
	payload, err := attest.Verify(ctx, env, v)
	if err != nil {
		add("%s: %v: the envelope was changed or signed by another key; rebuild, or pass the right --pub", envPath, err)
		return ps
	}
	stPath := filepath.Join(dir, m.Name+build.ProvenanceSuffix)
	if st, err := os.ReadFile(stPath); err != nil {
		add("reading %s: %v", stPath, err)
	} else if !bytes.Equal(st, payload) {
		add("%s differs from the statement signed in %s: it was changed after the build; trust only the signed one", stPath, filepath.Base(envPath))
	}
	var s intoto.Statement
	if err := protojson.Unmarshal(payload, &s); err != nil {
		add("the signed statement is not an in-toto Statement: %v", err)
		return ps
	}
	if err := s.Validate(); err != nil {
		add("the signed statement is not a valid in-toto Statement: %v", err)
		return ps
	}
	if s.GetPredicateType() != build.SLSAProvenanceType {
		add("the signed statement's predicate type is %q, want %q", s.GetPredicateType(), build.SLSAProvenanceType)
	}
	named := map[string]string{}
	for _, sub := range s.GetSubject() {
		want := sub.GetDigest()["sha256"]
		named[sub.GetName()] = want
		p := filepath.Join(dir, filepath.Base(sub.GetName()))
		got, _, err := build.FileSHA256(p)
		switch {
		case want == "":
			add("subject %s has no sha256 digest", sub.GetName())
		case err != nil:
			add("subject %s: %v: keep every output of the build together", sub.GetName(), err)
		case got != want:
			add("subject %s has sha256 %s, the signed provenance says %s: the file was changed after the build", sub.GetName(), got, want)
		}
	}
	for _, f := range []string{imagePath, manifestPath} {
		if _, ok := named[filepath.Base(f)]; !ok {
			add("%s is not a subject of the signed provenance: it is not an output of this build", f)
		} else if filepath.Dir(f) != dir {
			// Checked above under the name beside the image; the file given is elsewhere.
			if got, _, err := build.FileSHA256(f); err != nil || got != named[filepath.Base(f)] {
				add("%s does not have the sha256 the signed provenance gives %s", f, filepath.Base(f))
			}
		}
	}
	return ps
}
