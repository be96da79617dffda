package build

import (
	"encoding/base64"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"maps"
	"slices"
	"strings"

	slsa "github.com/in-toto/attestation/go/predicates/provenance/v1"
	intoto "github.com/in-toto/attestation/go/v1"
	"google.golang.org/protobuf/encoding/protojson"
	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/types/known/structpb"

	"github.com/drover-os/drover/image/gomod"
)

// Provenance constants: the statement and predicate types, and the URIs
// naming drover's build type and builder.
const (
	SLSAProvenanceType = "https://slsa.dev/provenance/v1"
	BuildType          = "https://drover.dev/build/v1"
	BuilderID          = "https://drover.dev/builder"
)

// Subject is one file the provenance speaks for: the image files, the
// manifest and the SBOMs, named as they are in the output directory.
type Subject struct {
	Name, SHA256 string
}

// Provenance renders an in-toto Statement with an SLSA v1 provenance
// predicate, built with the in-toto attestation library so that it
// validates against the spec's own rules. resolvedDependencies lists every
// input: the recipe and lock, each Debian package by the .deb's sha256,
// each Go module of every Go binary by its go.sum hash (dirHash: the h1
// hash in hex, as the in-toto DigestSet spec defines it), drover's own
// binaries, URL components, the Go toolchain (where it came from, the
// sha256 of its go binary), the source (the recipe repository's commit,
// digest gitCommit, and the recipe directory's files, digest dirHash, each
// with its state: clean, dirty or unknown), and every recipe file, keyring
// and file the recipe copies in, by sha256.
func Provenance(m *Manifest, subjects []Subject) ([]byte, error) {
	var subj []*intoto.ResourceDescriptor
	for _, s := range subjects {
		subj = append(subj, &intoto.ResourceDescriptor{Name: s.Name, Digest: map[string]string{"sha256": s.SHA256}})
	}
	deps := []*intoto.ResourceDescriptor{
		{Name: "recipe", Digest: map[string]string{"sha256": m.RecipeSHA256}},
		{Name: "lock", Digest: map[string]string{"sha256": m.LockSHA256}},
	}
	for _, p := range m.Packages {
		deps = append(deps, &intoto.ResourceDescriptor{Uri: debianPURL(p, m.Distro), Digest: map[string]string{"sha256": p.SHA256}})
	}
	toolchains := map[string]bool{}
	goDeps := func(component string, mods []string) error {
		for _, d := range mods {
			rd, err := moduleDescriptor(d)
			if err != nil {
				return fmt.Errorf("Go component %s: %w", component, err)
			}
			rd.Annotations, _ = structpb.NewStruct(map[string]any{"component": component})
			deps = append(deps, rd)
		}
		return nil
	}
	for _, g := range m.Go {
		if err := goDeps(g.Name, g.Deps); err != nil {
			return nil, err
		}
		toolchains[g.GoVersion] = true
	}
	for _, o := range m.Own {
		deps = append(deps, &intoto.ResourceDescriptor{Name: o.Path, Digest: map[string]string{"sha256": o.SHA256}})
		if err := goDeps(o.Path, o.Deps); err != nil {
			return nil, err
		}
		if o.GoVersion != "" {
			toolchains[o.GoVersion] = true
		}
	}
	for _, u := range m.URLs {
		deps = append(deps, &intoto.ResourceDescriptor{Name: u.Name, Uri: u.URL, Digest: map[string]string{"sha256": u.SHA256}})
	}
	for _, v := range slices.Sorted(maps.Keys(toolchains)) {
		deps = append(deps, toolchainDescriptor(v, m.Toolchain))
	}
	src, err := sourceDescriptors(m.RecipeTree)
	if err != nil {
		return nil, err
	}
	deps = append(deps, src...)
	for _, in := range m.Inputs {
		rd := &intoto.ResourceDescriptor{Name: in.Name, Digest: map[string]string{"sha256": in.SHA256}}
		rd.Annotations, _ = structpb.NewStruct(map[string]any{"role": in.Role})
		deps = append(deps, rd)
	}
	ext, err := structpb.NewStruct(map[string]any{
		"recipe": map[string]any{"name": m.Name, "sha256": m.RecipeSHA256},
		"lock":   map[string]any{"sha256": m.LockSHA256},
	})
	if err != nil {
		return nil, err
	}
	pred := &slsa.Provenance{
		BuildDefinition: &slsa.BuildDefinition{BuildType: BuildType, ExternalParameters: ext, ResolvedDependencies: deps},
		RunDetails: &slsa.RunDetails{
			Builder:  &slsa.Builder{Id: BuilderID, Version: map[string]string{"drover": m.Builder, "sourceState": string(m.BuilderSource.Known())}},
			Metadata: &slsa.BuildMetadata{InvocationId: m.BuildID},
		},
	}
	if err := pred.Validate(); err != nil {
		return nil, fmt.Errorf("provenance predicate: %w", err)
	}
	predStruct, err := toStruct(pred)
	if err != nil {
		return nil, err
	}
	st := &intoto.Statement{Type: intoto.StatementTypeUri, Subject: subj, PredicateType: SLSAProvenanceType, Predicate: predStruct}
	if err := st.Validate(); err != nil {
		return nil, fmt.Errorf("provenance statement: %w", err)
	}
	return stableJSON(st)
}

// moduleDescriptor turns a build-info dependency "path@version h1:…" into a
// resource descriptor whose digest is the module's go.sum hash.
func moduleDescriptor(dep string) (*intoto.ResourceDescriptor, error) {
	mod, sum, _ := strings.Cut(dep, " ")
	h1, ok := strings.CutPrefix(sum, "h1:")
	raw, err := base64.StdEncoding.DecodeString(h1)
	if !ok || err != nil || len(raw) != 32 {
		return nil, fmt.Errorf("module %s has no h1: hash in its build info (%q): build it with module mode and go.sum", mod, sum)
	}
	path, version, _ := strings.Cut(mod, "@")
	return &intoto.ResourceDescriptor{Uri: goPURL(path, version), Digest: map[string]string{"dirHash": hex.EncodeToString(raw)}}, nil
}

func toStruct(m proto.Message) (*structpb.Struct, error) {
	b, err := protojson.Marshal(m)
	if err != nil {
		return nil, err
	}
	s := &structpb.Struct{}
	if err := protojson.Unmarshal(b, s); err != nil {
		return nil, err
	}
	return s, nil
}

// stableJSON renders a proto message as indented JSON with sorted keys:
// protojson deliberately varies its whitespace between runs, and the
// provenance of a reproducible build should not.
func stableJSON(m proto.Message) ([]byte, error) {
	b, err := protojson.Marshal(m)
	if err != nil {
		return nil, err
	}
	var v any
	if err := json.Unmarshal(b, &v); err != nil {
		return nil, err
	}
	out, err := json.MarshalIndent(v, "", "  ")
	if err != nil {
		return nil, err
	}
	return append(out, '\n'), nil
}

// toolchainDescriptor names the Go toolchain version v: where it came from
// and the sha256 of the go binary that ran (t, recorded by the build), or,
// for a version the build has no facts of (a manifest from before drover
// recorded them), the version alone: never a download site it did not
// come from.
func toolchainDescriptor(v string, t *gomod.Toolchain) *intoto.ResourceDescriptor {
	if t == nil || t.Version != v {
		rd := &intoto.ResourceDescriptor{Name: "go toolchain " + v}
		rd.Annotations, _ = structpb.NewStruct(map[string]any{"version": v})
		return rd
	}
	ann := map[string]any{"version": v, "digest": "sha256 of bin/go"}
	if t.ZipSHA256 != "" {
		ann["moduleZipSHA256"] = t.ZipSHA256
	}
	rd := &intoto.ResourceDescriptor{Name: "go toolchain", Uri: t.URI, Digest: map[string]string{"sha256": t.GoSHA256}}
	rd.Annotations, _ = structpb.NewStruct(ann)
	return rd
}

// sourceDescriptors names the source of the build: the commit of the
// recipe's repository (git+<repository>@<commit>, digest gitCommit), and the
// recipe directory's files as read (digest dirHash), which is all there is
// for a tree without a commit. Each carries the tree's state.
func sourceDescriptors(t *RecipeTree) ([]*intoto.ResourceDescriptor, error) {
	if t == nil {
		return nil, nil
	}
	ann := map[string]any{"state": string(t.State.Known()), "dir": t.Dir}
	var out []*intoto.ResourceDescriptor
	if t.Commit != "" {
		alg := "gitCommit"
		if t.CommitFormat == "sha256" {
			alg = "gitCommitSHA256" // in-toto's gitCommit is a SHA-1 id
		}
		rd := &intoto.ResourceDescriptor{Name: "source", Digest: map[string]string{alg: t.Commit}}
		if t.Repository != "" {
			rd.Uri = t.Repository + "@" + t.Commit
		}
		rd.Annotations, _ = structpb.NewStruct(ann)
		out = append(out, rd)
	}
	rd := &intoto.ResourceDescriptor{Name: "recipe tree " + t.Dir, Digest: map[string]string{"dirHash": t.DirHash}}
	ann["files"] = float64(t.Files)
	rd.Annotations, _ = structpb.NewStruct(ann)
	out = append(out, rd)
	for _, d := range out {
		if err := d.Validate(); err != nil {
			return nil, fmt.Errorf("provenance: the source %s: %w", d.GetName(), err)
		}
	}
	return out, nil
}
