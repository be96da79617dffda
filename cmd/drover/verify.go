package main

import (
	"encoding/json"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strings"

	"github.com/spf13/cobra"

	"github.com/secure-systems-lab/go-securesystemslib/dsse"

	"github.com/drover-os/drover/image/attest"
	"github.com/drover-os/drover/image/verify"
)

func newVerifyCmd() *cobra.Command {
	var manifestPath, pubKey string
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
the image.

A qcow2 image cannot be checked in place: verify the raw image it was made
from, or convert it with qemu-img convert -O raw.

Exit status: 0 when the image verifies, 1 when problems were found, 2 on
errors (no manifest).`,
		Example: `  drover verify out/ecs-node.raw
  drover verify --manifest release/ecs-node.manifest.json /mnt/copy/ecs-node.raw
  drover verify --json out/ecs-node.raw
  drover verify --provenance --pub release.pub out/ecs-node.raw`,
		Args: usageArgs(cobra.ExactArgs(1)),
		RunE: func(cmd *cobra.Command, args []string) error {
			image := args[0]
			if _, err := os.Stat(image); err != nil {
				return &exitError{code: 2, err: fmt.Errorf("reading image %s: %w: pass the .raw image drover build wrote", image, err)}
			}
			if manifestPath == "" {
				manifestPath = beside(image)
			}
			m, err := loadManifest(manifestPath)
			if err != nil {
				return &exitError{code: 2, err: err}
			}
			var pub dsse.Verifier
			if checkProvenance {
				if pubKey == "" {
					return &exitError{code: 2, err: fmt.Errorf("--provenance needs --pub KEY.pub, the public key of the build's --sign-key")}
				}
				if pub, err = attest.LoadVerifier(pubKey); err != nil {
					return &exitError{code: 2, err: err}
				}
			} else if pubKey != "" {
				return &exitError{code: 2, err: fmt.Errorf("--pub is only used with --provenance")}
			}
			problems := verify.Verify(image, m)
			if pub != nil {
				problems = append(problems, verify.Provenance(cmd.Context(), image, manifestPath, m, pub)...)
			}
			out := cmd.OutOrStdout()
			if asJSON {
				err = verifyJSON(out, image, manifestPath, m.RootHash, problems)
			} else {
				err = verifyText(out, image, manifestPath, m.RootHash, len(m.Partitions), len(m.ESP), pub != nil, problems)
			}
			if err != nil {
				return &exitError{code: 2, err: fmt.Errorf("writing the result: %w", err)}
			}
			if len(problems) > 0 {
				return &exitError{code: 1}
			}
			return nil
		},
	}
	cmd.Flags().StringVar(&manifestPath, "manifest", "", "manifest to check against (default: <name>.manifest.json beside the image)")
	cmd.Flags().BoolVar(&checkProvenance, "provenance", false, "also check the signed provenance (<name>.provenance.dsse.json) and its subjects")
	cmd.Flags().StringVar(&pubKey, "pub", "", "public key (PEM) the provenance must be signed with (with --provenance)")
	cmd.Flags().BoolVar(&asJSON, "json", false, "print JSON: {image, manifest, ok, problems: [{part, message}]}")
	cmd.SetFlagErrorFunc(func(_ *cobra.Command, err error) error { return &exitError{code: 2, err: err} })
	return cmd
}

func verifyText(w io.Writer, image, manifest, rootHash string, parts, espFiles int, provenance bool, problems []verify.Problem) error {
	var b strings.Builder
	if len(problems) == 0 {
		signed := ""
		if provenance {
			signed = ", signed provenance and its subjects"
		}
		fmt.Fprintf(&b, "%s verifies against %s: image sha256, GPT, %d partitions, dm-verity root hash %s, %d ESP files%s\n",
			image, filepath.Base(manifest), parts, rootHash, espFiles, signed)
	} else {
		for _, p := range problems {
			fmt.Fprintf(&b, "%s: %s\n", p.Part, p.Message)
		}
		var where []string
		seen := map[string]bool{}
		for _, p := range problems {
			if !seen[p.Part] {
				seen[p.Part] = true
				where = append(where, p.Part)
			}
		}
		noun := "problems"
		if len(problems) == 1 {
			noun = "problem"
		}
		fmt.Fprintf(&b, "%s does not verify against %s: %d %s (%s)\n", image, filepath.Base(manifest), len(problems), noun, strings.Join(where, ", "))
	}
	_, err := io.WriteString(w, b.String())
	return err
}

func verifyJSON(w io.Writer, image, manifest, rootHash string, problems []verify.Problem) error {
	if problems == nil {
		problems = []verify.Problem{}
	}
	b, err := json.MarshalIndent(struct {
		Image    string           `json:"image"`
		Manifest string           `json:"manifest"`
		RootHash string           `json:"rootHash"`
		OK       bool             `json:"ok"`
		Problems []verify.Problem `json:"problems"`
	}{image, manifest, rootHash, len(problems) == 0, problems}, "", "  ")
	if err != nil {
		return err
	}
	_, err = w.Write(append(b, '\n'))
	return err
}
