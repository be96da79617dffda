package main

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"slices"
	"strings"

	"github.com/spf13/cobra"

	"github.com/secure-systems-lab/go-securesystemslib/dsse"

	"github.com/drover-os/drover/image/attest"
	"github.com/drover-os/drover/image/build"
	"github.com/drover-os/drover/image/lock"
	"github.com/drover-os/drover/image/recipe"
	"github.com/drover-os/drover/image/verify"
)

func newVerifyCmd() *cobra.Command {
	var manifestPath, pubKey, expectLock, expectRecipe, expectBuilder string
	var asJSON, checkProvenance bool
	cmd := &cobra.Command{
		Use:   "verify IMAGE",
		Short: "Re-check a built image against its manifest",
		Long: `verify re-reads a raw (or fixed VHD) image and checks it against its manifest:
the image file's sha256, the GPT (both copies) and each entry's name, type,
UUID, offset and size, every partition's sha256, the dm-verity hash tree of
the root partition against the root hash (naming the corrupt block), and
every file of the ESP, including the root hash on the loader entry's command
line. It reports every difference, each naming the partition it is in
(esp, root, root-verity), the GPT or the image, and what to do.

With --provenance it also checks the signed provenance beside the image
(<name>.provenance.dsse.json) with the public key --pub: the DSSE signature,
that <name>.provenance.json is the signed statement, and every subject's
sha256 (the image files, the manifest and the SBOM) against the files beside
the image. The predicate must be drover's: buildDefinition.buildType
https://drover.dev/build/v1 and runDetails.builder.id https://drover.dev/builder
(or the ID --expect-builder gives). --expect-lock FILE and --expect-recipe
FILE name the lock and recipe you expect the image to be built from: the
provenance must record their sha256 (the lock's canonical form, without its
comment header, as drover build records it) in resolvedDependencies and
externalParameters. Each problem names the field, e.g.
  provenance: predicate.buildDefinition.resolvedDependencies: lock sha256 …, want … (from --expect-lock recipes/ecs-node.yaml.lock)

A qcow2 image cannot be read in place. With --provenance it is checked by
its digest: the file's size and sha256 against the manifest's qcow2 entry,
and the signed provenance and its subjects as above (the qcow2 and the
manifest must be among them); the GPT, the partitions, the dm-verity tree and
the ESP inside it are not re-read, and the output says so. To re-read them,
convert it to raw (qemu-img convert -O raw) and verify the copy with
--manifest. Without --provenance a qcow2 is refused.

Exit status: 0 when the image verifies, 1 when problems were found, 2 on
errors (no manifest).`,
		Example: `  drover verify out/ecs-node.raw
  drover verify --manifest release/ecs-node.manifest.json /mnt/copy/ecs-node.raw
  drover verify --json out/ecs-node.raw
  drover verify --provenance --pub release.pub out/ecs-node.raw
  drover verify --provenance --pub release.pub --expect-lock recipes/ecs-node.yaml.lock out/ecs-node.raw`,
		Args: usageArgs(cobra.ExactArgs(1)),
		RunE: func(cmd *cobra.Command, args []string) error {
			image := args[0]
			if _, err := os.Stat(image); err != nil {
				return &exitError{code: 2, err: fmt.Errorf("reading image %s: %w: pass the .raw image drover build wrote", image, err)}
			}
			if manifestPath == "" {
				manifestPath = beside(image)
			}
			m, pub, err := verifyInputs(manifestPath, checkProvenance, pubKey)
			if err != nil {
				return &exitError{code: 2, err: err}
			}
			want, err := expectations(checkProvenance, expectLock, expectRecipe, expectBuilder)
			if err != nil {
				return &exitError{code: 2, err: err}
			}
			r, err := checkImage(cmd.Context(), image, manifestPath, m, pub, want)
			if err != nil {
				return &exitError{code: 2, err: err}
			}
			out := cmd.OutOrStdout()
			if asJSON {
				err = verifyJSON(out, r)
			} else {
				err = verifyText(out, r)
			}
			if err != nil {
				return &exitError{code: 2, err: fmt.Errorf("writing the result: %w", err)}
			}
			if len(r.problems) > 0 {
				return &exitError{code: 1}
			}
			return nil
		},
	}
	cmd.Flags().StringVar(&manifestPath, "manifest", "", "manifest to check against (default: <name>.manifest.json beside the image)")
	cmd.Flags().BoolVar(&checkProvenance, "provenance", false, "also check the signed provenance (<name>.provenance.dsse.json) and its subjects")
	cmd.Flags().StringVar(&pubKey, "pub", "", "public key (PEM) the provenance must be signed with (with --provenance)")
	cmd.Flags().StringVar(&expectLock, "expect-lock", "", "lock file the provenance must record as the build's lock, by sha256 (with --provenance)")
	cmd.Flags().StringVar(&expectRecipe, "expect-recipe", "", "recipe file the provenance must record as the build's recipe, by sha256 (with --provenance)")
	cmd.Flags().StringVar(&expectBuilder, "expect-builder", "", "builder ID the provenance's runDetails.builder.id must be (with --provenance; default "+build.BuilderID+")")
	cmd.Flags().BoolVar(&asJSON, "json", false, "print JSON: {image, manifest, rootHash, ok, problems: [{part, message}], notReread}")
	cmd.SetFlagErrorFunc(func(_ *cobra.Command, err error) error { return &exitError{code: 2, err: err} })
	return cmd
}

// checkImage runs drover verify's checks of image against its manifest m:
// the image re-read, or a qcow2 by its digest, and the signed provenance
// when pub is set. drover publish runs the same checks.
// verifyInputs loads what drover verify's checks compare an image with:
// its manifest and, with --provenance, the key the provenance must be
// signed with. drover publish checks the same way.
func verifyInputs(manifestPath string, checkProvenance bool, pubKey string) (*build.Manifest, dsse.Verifier, error) {
	m, err := loadManifest(manifestPath)
	if err != nil {
		return nil, nil, err
	}
	switch {
	case checkProvenance && pubKey == "":
		return nil, nil, errors.New("--provenance needs --pub KEY.pub, the public key of the build's --sign-key")
	case checkProvenance:
		pub, err := attest.LoadVerifier(pubKey)
		return m, pub, err
	case pubKey != "":
		return nil, nil, errors.New("--pub is only used with --provenance")
	}
	return m, nil, nil
}

// expectations reads what --expect-lock, --expect-recipe and
// --expect-builder say the signed provenance must record.
func expectations(checkProvenance bool, lockPath, recipePath, builderID string) (verify.Expect, error) {
	want := verify.Expect{BuilderID: builderID}
	if !checkProvenance {
		for _, f := range [][2]string{{"--expect-lock", lockPath}, {"--expect-recipe", recipePath}, {"--expect-builder", builderID}} {
			if f[1] != "" {
				return want, fmt.Errorf("%s is checked against the signed provenance: add --provenance --pub KEY.pub", f[0])
			}
		}
		return want, nil
	}
	if lockPath != "" {
		l, err := lock.Read(lockPath)
		if err != nil {
			return want, fmt.Errorf("--expect-lock %s: %w", lockPath, err)
		}
		want.Lock = &verify.Digest{SHA256: build.LockSHA256(l), From: lockPath}
	}
	if recipePath != "" {
		r, err := recipe.Load(recipePath)
		if err != nil {
			return want, fmt.Errorf("--expect-recipe %s: %w", recipePath, err)
		}
		want.Recipe = &verify.Digest{SHA256: r.Digest(), From: recipePath}
	}
	return want, nil
}

func checkImage(ctx context.Context, image, manifestPath string, m *build.Manifest, pub dsse.Verifier, want verify.Expect) (verifyResult, error) {
	format, err := verify.Format(image)
	if err != nil {
		return verifyResult{}, fmt.Errorf("reading image %s: %w", image, err)
	}
	r := verifyResult{image: image, manifest: manifestPath, m: m, provenance: pub != nil, format: format}
	switch {
	case format == verify.FormatQCOW2 && pub != nil:
		r.notReread = verify.NotReread(m)
		r.problems = verify.SignedDigest(ctx, image, manifestPath, m, pub, want)
	case pub != nil:
		r.problems = append(verify.Verify(image, m), verify.Provenance(ctx, image, manifestPath, m, pub, want)...)
	default:
		r.problems = verify.Verify(image, m)
	}
	return r, nil
}

// verifyResult is what one drover verify found, for printing.
type verifyResult struct {
	image, manifest string
	m               *build.Manifest
	provenance      bool
	// notReread lists the parts checked only through the image's sha256
	// (a qcow2 checked by its digest); empty when the image was re-read.
	notReread []string
	format    string // the image file's, as verify.Format tells it
	problems  []verify.Problem
}

func verifyText(w io.Writer, r verifyResult) error {
	var b strings.Builder
	manifest := filepath.Base(r.manifest)
	switch {
	case len(r.problems) == 0 && len(r.notReread) > 0:
		fmt.Fprintf(&b, "%s verifies against %s by its digest: image sha256 and size, signed provenance and its subjects\n", r.image, manifest)
		copyPath := strings.TrimSuffix(r.image, filepath.Ext(r.image)) + "-copy.raw"
		fmt.Fprintf(&b, "not re-read: the GPT, %d partitions, the dm-verity tree (root hash %s) and %d ESP files inside %s: a qcow2 is not read in place, only its sha256 vouches for them; to re-read them, convert it to raw: qemu-img convert -O raw %s %s && drover verify --manifest %s %s\n",
			len(r.m.Partitions), r.m.RootHash, len(r.m.ESP), filepath.Base(r.image), r.image, copyPath, r.manifest, copyPath)
	case len(r.problems) == 0:
		signed := ""
		if r.provenance {
			signed = ", signed provenance and its subjects"
		}
		// A build without the raw format has no digest for a raw copy:
		// then the file as a whole was not checked, only its parts.
		whole := "image sha256, "
		if !slices.ContainsFunc(r.m.Images, func(im build.ImageFile) bool { return im.Format == r.format }) {
			whole = "(no digest of the file as a whole: the manifest lists no " + r.format + " image) "
		}
		fmt.Fprintf(&b, "%s verifies against %s: %sGPT, %d partitions, dm-verity root hash %s, %d ESP files%s\n",
			r.image, manifest, whole, len(r.m.Partitions), r.m.RootHash, len(r.m.ESP), signed)
	default:
		for _, p := range r.problems {
			fmt.Fprintf(&b, "%s: %s\n", p.Part, p.Message)
		}
		var where []string
		seen := map[string]bool{}
		for _, p := range r.problems {
			if !seen[p.Part] {
				seen[p.Part] = true
				where = append(where, p.Part)
			}
		}
		noun := "problems"
		if len(r.problems) == 1 {
			noun = "problem"
		}
		fmt.Fprintf(&b, "%s does not verify against %s: %d %s (%s)\n", r.image, manifest, len(r.problems), noun, strings.Join(where, ", "))
	}
	_, err := io.WriteString(w, b.String())
	return err
}

func verifyJSON(w io.Writer, r verifyResult) error {
	problems := r.problems
	if problems == nil {
		problems = []verify.Problem{}
	}
	b, err := json.MarshalIndent(struct {
		Image     string           `json:"image"`
		Manifest  string           `json:"manifest"`
		RootHash  string           `json:"rootHash"`
		OK        bool             `json:"ok"`
		Problems  []verify.Problem `json:"problems"`
		NotReread []string         `json:"notReread,omitempty"`
	}{r.image, r.manifest, r.m.RootHash, len(problems) == 0, problems, r.notReread}, "", "  ")
	if err != nil {
		return err
	}
	_, err = w.Write(append(b, '\n'))
	return err
}
