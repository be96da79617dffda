package verify

import (
	"bytes"
	"context"
	"fmt"
	"os"
	"path/filepath"

	slsa "github.com/in-toto/attestation/go/predicates/provenance/v1"
	intoto "github.com/in-toto/attestation/go/v1"
	"github.com/secure-systems-lab/go-securesystemslib/dsse"
	"google.golang.org/protobuf/encoding/protojson"
	"google.golang.org/protobuf/types/known/structpb"

	"github.com/drover-os/drover/image/attest"
	"github.com/drover-os/drover/image/build"
)

// PartProvenance is the part a provenance problem is in.
const PartProvenance = "provenance"

// Expect is what the signed provenance must say beyond its signature and
// subjects. The build type is always drover's (build.BuildType).
type Expect struct {
	// BuilderID is the runDetails.builder.id the provenance must name;
	// empty means drover's own, build.BuilderID.
	BuilderID string
	// Lock and Recipe, when set, are digests the provenance must record
	// as the build's inputs (drover verify --expect-lock, --expect-recipe).
	Lock, Recipe *Digest
}

// Digest is an expected sha256 and where the caller took it from, for the
// message when it is not the one recorded.
type Digest struct {
	SHA256, From string
}

// Provenance checks the signed provenance beside imagePath
// (<name>.provenance.dsse.json) with the public key v: the DSSE signature,
// that the unsigned statement beside it is the signed one byte for byte,
// that the statement is a valid in-toto Statement with an SLSA v1
// provenance predicate, and that every subject's file beside the image has
// the sha256 it names — including the image itself and manifestPath, so a
// manifest swapped for another cannot pass Verify either.
//
// The predicate must be drover's build type, name the builder want names
// (drover's by default) and, for each digest want gives, record it in
// resolvedDependencies and externalParameters (see checkPredicate).
func Provenance(ctx context.Context, imagePath, manifestPath string, m *build.Manifest, v dsse.Verifier, want Expect) []Problem {
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
	} else {
		for _, msg := range checkPredicate(s.GetPredicate(), want) {
			add("%s", msg)
		}
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

// checkPredicate checks the SLSA predicate against want; each problem
// names the field (predicate.…) and what to do.
func checkPredicate(pred *structpb.Struct, want Expect) []string {
	var out []string
	raw, err := protojson.Marshal(pred)
	var p slsa.Provenance
	if err == nil {
		err = protojson.Unmarshal(raw, &p)
	}
	if err != nil {
		return []string{fmt.Sprintf("predicate: not an SLSA v1 provenance: %v", err)}
	}
	if got := p.GetBuildDefinition().GetBuildType(); got != build.BuildType {
		out = append(out, fmt.Sprintf("predicate.buildDefinition.buildType is %q, want %q: the statement is not a drover build's", got, build.BuildType))
	}
	id, from := build.BuilderID, "drover's"
	if want.BuilderID != "" {
		id, from = want.BuilderID, "from --expect-builder"
	}
	if got := p.GetRunDetails().GetBuilder().GetId(); got != id {
		out = append(out, fmt.Sprintf("predicate.runDetails.builder.id is %q, want %q (%s): the image was built by another builder; trust only the builder you expect", got, id, from))
	}
	ext := p.GetBuildDefinition().GetExternalParameters().GetFields()
	for _, in := range []struct {
		name, flag string
		want       *Digest
	}{{"lock", "--expect-lock", want.Lock}, {"recipe", "--expect-recipe", want.Recipe}} {
		if in.want == nil {
			continue
		}
		var dep *intoto.ResourceDescriptor
		for _, d := range p.GetBuildDefinition().GetResolvedDependencies() {
			if d.GetName() == in.name {
				dep = d
			}
		}
		switch got := dep.GetDigest()["sha256"]; {
		case dep == nil:
			out = append(out, fmt.Sprintf("predicate.buildDefinition.resolvedDependencies: no %s entry, want %s sha256 %s (from %s %s): the provenance does not say which %s was built",
				in.name, in.name, in.want.SHA256, in.flag, in.want.From, in.name))
		case got != in.want.SHA256:
			out = append(out, fmt.Sprintf("predicate.buildDefinition.resolvedDependencies: %s sha256 %s, want %s (from %s %s): the image was built from another %s",
				in.name, got, in.want.SHA256, in.flag, in.want.From, in.name))
		}
		if got := ext[in.name].GetStructValue().GetFields()["sha256"].GetStringValue(); got != in.want.SHA256 {
			out = append(out, fmt.Sprintf("predicate.buildDefinition.externalParameters.%s.sha256 is %q, want %s (from %s %s)", in.name, got, in.want.SHA256, in.flag, in.want.From))
		}
	}
	return out
}
