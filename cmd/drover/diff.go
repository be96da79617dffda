package main

import (
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"

	"github.com/spf13/cobra"

	"github.com/drover-os/drover/image/build"
	"github.com/drover-os/drover/image/diff"
)

const manifestSchema = "drover.dev/manifest/v1"

func newDiffCmd() *cobra.Command {
	var markdown, asJSON bool
	cmd := &cobra.Command{
		Use:   "diff OLD NEW",
		Short: "Explain what changed between two images, from their manifests",
		Long: `diff compares two images by their manifests and prints what changed: packages
(added, removed, new versions), Go and URL components, kernel, command line,
root hash, enabled units, initrd modules, boot files, partitions and the files
of the root filesystem. Files of a package (or component) that changed are
counted under it; every other changed file is listed.

For each Debian source package whose version changed, diff lists the
changelog entries between the two versions and the CVE IDs they name (for a
downgrade: the entries the image loses), and marks a newer version from a
-security suite as a security update; for Go modules, the CVE and GHSA IDs
of the release notes the module carries (Kubernetes' CHANGELOG/, containerd's
releases/). The summary counts them: "fixes N CVEs in M packages". The build
records the changelogs in the manifest; with an older manifest diff says the
changelog is not recorded.

OLD and NEW are manifest files, images (out/x.raw, .qcow2 or .vhd: the
x.manifest.json beside it is read) or output directories holding one
manifest.

Exit status: 0 when the images are the same, 1 when they differ, 2 on errors.`,
		Example: `  drover diff old/ecs-node.raw out/ecs-node.raw
  drover diff --markdown main.manifest.json out/ecs-node.manifest.json > diff.md
  drover diff --json old/ out/ | jq .packages`,
		Args: usageArgs(cobra.ExactArgs(2)),
		RunE: func(cmd *cobra.Command, args []string) error {
			if markdown && asJSON {
				return &exitError{code: 2, err: errors.New("--markdown and --json exclude each other: pick one")}
			}
			oldM, _, err := loadManifestFor(args[0])
			if err != nil {
				return &exitError{code: 2, err: err}
			}
			newM, _, err := loadManifestFor(args[1])
			if err != nil {
				return &exitError{code: 2, err: err}
			}
			d := diff.Compare(oldM, newM)
			out := cmd.OutOrStdout()
			switch {
			case asJSON:
				err = d.JSON(out)
			case markdown:
				err = d.Markdown(out)
			default:
				err = d.Text(out)
			}
			if err != nil {
				return &exitError{code: 2, err: fmt.Errorf("writing the diff: %w", err)}
			}
			if !d.Equal() {
				return &exitError{code: 1}
			}
			return nil
		},
	}
	cmd.Flags().BoolVar(&markdown, "markdown", false, "print Markdown for a merge request (tables, long lists folded)")
	cmd.Flags().BoolVar(&asJSON, "json", false, "print JSON (stable field order)")
	cmd.SetFlagErrorFunc(func(_ *cobra.Command, err error) error { return &exitError{code: 2, err: err} })
	return cmd
}

// usageArgs makes a wrong number of arguments exit 2, the status diff and
// verify reserve for errors (1 means "different" / "problems found").
func usageArgs(check cobra.PositionalArgs) cobra.PositionalArgs {
	return func(cmd *cobra.Command, args []string) error {
		if err := check(cmd, args); err != nil {
			return &exitError{code: 2, err: fmt.Errorf("%w (see drover %s --help)", err, cmd.Name())}
		}
		return nil
	}
}

// manifestFor maps an argument to a manifest path: a manifest as is, an
// image to the manifest beside it, a directory to the one manifest in it.
func manifestFor(arg string) (string, error) {
	st, err := os.Stat(arg)
	if err != nil && !errors.Is(err, os.ErrNotExist) {
		return "", fmt.Errorf("reading %s: %w", arg, err)
	}
	// An image that is gone still names its manifest, often kept longer
	// than the image itself.
	if err == nil && st.IsDir() {
		found, _ := filepath.Glob(filepath.Join(arg, "*.manifest.json"))
		if len(found) != 1 {
			return "", fmt.Errorf("directory %s holds %d manifests (*.manifest.json), want exactly one: name the manifest or image file", arg, len(found))
		}
		return found[0], nil
	}
	if strings.HasSuffix(arg, ".json") {
		return arg, nil
	}
	return beside(arg), nil
}

// beside is the manifest drover build writes next to an image:
// out/x.raw → out/x.manifest.json.
func beside(image string) string {
	return strings.TrimSuffix(image, filepath.Ext(image)) + ".manifest.json"
}

func loadManifestFor(arg string) (*build.Manifest, string, error) {
	p, err := manifestFor(arg)
	if err != nil {
		return nil, "", err
	}
	m, err := loadManifest(p)
	return m, p, err
}

func loadManifest(p string) (*build.Manifest, error) {
	data, err := os.ReadFile(p)
	if errors.Is(err, os.ErrNotExist) {
		return nil, fmt.Errorf("reading manifest %s: it does not exist: drover build writes <name>.manifest.json beside the image; pass it explicitly", p)
	}
	if err != nil {
		return nil, fmt.Errorf("reading manifest %s: %w", p, err)
	}
	var m build.Manifest
	if err := json.Unmarshal(data, &m); err != nil {
		return nil, fmt.Errorf("reading manifest %s: %w: pass a <name>.manifest.json written by drover build", p, err)
	}
	if m.Schema != manifestSchema {
		return nil, fmt.Errorf("reading manifest %s: schema %q, want %q: pass a <name>.manifest.json written by this drover", p, m.Schema, manifestSchema)
	}
	return &m, nil
}
