package main

import (
	"encoding/json"
	"fmt"
	"os"
	"time"

	"github.com/spf13/cobra"

	"github.com/secure-systems-lab/go-securesystemslib/dsse"

	"github.com/drover-os/drover/image/attest"
	"github.com/drover-os/drover/image/build"
	"github.com/drover-os/drover/image/gomod"
	"github.com/drover-os/drover/image/lock"
	"github.com/drover-os/drover/image/recipe"
	"github.com/drover-os/drover/internal/bytesize"
)

func newBuildCmd(g *globals) *cobra.Command {
	var out, agentBin, initBin, signKey string
	var sb secureBootFlags
	var plan, asJSON, release bool
	cmd := &cobra.Command{
		Use:   "build RECIPE",
		Short: "Build a bootable, verity-protected UEFI disk image from a recipe and its lock",
		Long: `build assembles the image the lock pins, rootless and without mounts: the
packages' data is streamed into an in-memory tree, finalized, written as an
erofs root with a dm-verity hash tree, an initrd with drover-init, a FAT32 ESP
with systemd-boot, and a GPT disk. Outputs in the output directory:

  <name>.raw, <name>.qcow2, <name>.vhd   (raw always; the others as the recipe's image.formats says)
  <name>.manifest.json                   every package, Go component, file digest, partition, the root hash
  <name>.spdx.json                       SPDX 2.3 SBOM
  <name>.cdx.json                        CycloneDX 1.6 SBOM
  <name>.provenance.json                 in-toto statement with an SLSA v1 provenance predicate
  <name>.provenance.dsse.json            the statement in a DSSE envelope signed with --sign-key (when given)

drover-agent and drover-init are compiled from the checkout of drover the
recipe (or the working directory) is in, with the lock's Go toolchain and
reproducible flags; the manifest records the commit and whether the tree was
modified (so does /usr/lib/os-release: DROVER_SOURCE). --agent and --init
install given binaries instead, recorded as an override. The pod sandbox
image of a recipe that pins one (sandbox.digest) is built from the same
checkout (cmd/drover-pause, for amd64 and arm64, one OCI index) and must
match the pin.

The manifest, the SBOMs and the provenance name the builder by its version
(the commit make build stamps, else its build info's module version or VCS
revision, else "dev") and record what is known of each source as clean,
dirty or unknown: a tree without .git, or a git that fails, is unknown,
never clean. --release refuses, before writing any output, a builder whose
version is "dev" or whose source is not clean, own binaries given with
--agent/--init or compiled from a dirty or unknown tree, and a recipe
directory that is not its commit's: build drover from a clean git checkout
with make build and run bin/drover build --release there.

The same recipe, lock and checkout give bit-identical images, whatever go is
installed or GOTOOLCHAIN says: the lock's toolchain is fetched and used. Outputs appear
only when the whole build succeeded. It refuses a lock that no longer matches
the recipe: run drover lock.

The build trusts the signed archive, not the lock's word. Before a
package is downloaded or unpacked, every deb line (name, version,
architecture, sha256, size, pool path) must be an entry of the Packages
index of its suite, as listed by the InRelease the lock pins: that
InRelease is taken from the download cache (drover lock keeps it there)
or from the mirror while it still serves it, checked against the lock's
sha256 and verified against the same trust root as drover lock; the
indexes are fetched by the hashes it lists. When the mirror has moved on
and the cache lacks the pinned InRelease, the mirror's newer one (never an
older one) stands in, and a version superseded since fails too.

Exit status: 0 built; 2 the lock disagrees with the signed archive (a deb
line the index does not list or contradicts, each named by file and
line): run drover lock --refresh RECIPE and review the diff; 1 any other
failure.`,
		Example: `  drover build recipes/ecs-node.yaml -o out/
  drover build --plan recipes/minimal.yaml`,
		Args: cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			r, err := recipe.Load(args[0])
			if err != nil {
				return err
			}
			l, err := lock.Read(r.LockPath())
			if err != nil {
				return err
			}
			p, err := build.NewPlan(r, l, out)
			if err != nil {
				return err
			}
			if plan {
				fmt.Fprint(cmd.OutOrStdout(), p)
				return nil
			}
			if release { // before the build: a builder that cannot release must not cost one
				if err := build.CheckReleaseBuilder(version, builderSource); err != nil {
					return err
				}
			}
			o, err := g.options(len(l.Debs) > 0)
			if err != nil {
				return err
			}
			var signer dsse.Signer
			if signKey != "" { // read before the build: a bad key must not cost a whole build
				if signer, err = attest.LoadSigner(signKey); err != nil {
					return err
				}
			}
			// drover-agent, drover-init and the sandbox image's pause are
			// built from the checkout the recipe (or the working directory)
			// is in; --agent and --init replace the first two only.
			var src *gomod.Source
			if (agentBin == "" && initBin == "") || r.Sandbox.Digest != "" {
				cwd, _ := os.Getwd()
				if src, err = gomod.FindSource(build.DroverModule, r.Dir, cwd); err != nil {
					if agentBin != "" {
						err = fmt.Errorf("%w (the recipe's sandbox image, %s, is built from it even with --agent and --init)", err, build.PausePackage)
					}
					return err
				}
			}
			sbSigner, err := sb.signer()
			if err != nil {
				return err
			}
			start := time.Now()
			res, err := build.Build(cmd.Context(), p, build.Options{Sources: o, Source: src, AgentBin: agentBin, InitBin: initBin, Version: version, BuilderSource: builderSource, Release: release, Log: g.log(), Signer: signer,
				SecureBoot: sbSigner, SecureBootEnroll: sb.enroll})
			if err != nil {
				return lockExit(err)
			}
			took := time.Since(start)
			fmt.Fprintf(g.log(), "build: %s in %s, root hash %s\n", r.Name, took.Round(time.Millisecond), res.Manifest.RootHash)
			if asJSON {
				type out struct {
					Path string `json:"path"`
					Size int64  `json:"size"`
				}
				type stage struct {
					Stage   string  `json:"stage"`
					Seconds float64 `json:"seconds"`
				}
				doc := struct {
					Name     string  `json:"name"`
					RootHash string  `json:"rootHash"`
					BuildID  string  `json:"buildID"`
					Seconds  float64 `json:"seconds"`
					Outputs  []out   `json:"outputs"`
					Stages   []stage `json:"stages"`
				}{Name: r.Name, RootHash: res.Manifest.RootHash, BuildID: res.Manifest.BuildID, Seconds: took.Seconds()}
				for _, o := range res.Outputs {
					fi, _ := os.Stat(o)
					doc.Outputs = append(doc.Outputs, out{o, fi.Size()})
				}
				for _, t := range res.Timings {
					doc.Stages = append(doc.Stages, stage{t.Stage, t.Took.Seconds()})
				}
				b, _ := json.MarshalIndent(doc, "", "  ")
				fmt.Fprintln(cmd.OutOrStdout(), string(b))
				return nil
			}
			for _, o := range res.Outputs {
				fi, _ := os.Stat(o)
				fmt.Fprintf(cmd.OutOrStdout(), "%s\t%s\n", o, bytesize.Format(fi.Size()))
			}
			return nil
		},
	}
	cmd.Flags().StringVarP(&out, "output", "o", "out", "output directory")
	cmd.Flags().BoolVar(&plan, "plan", false, "print the plan and build nothing")
	cmd.Flags().BoolVar(&asJSON, "json", false, "print the result (outputs, root hash, stage timings) as JSON")
	cmd.Flags().BoolVar(&release, "release", false, "refuse the build unless drover, its own binaries and the recipe directory come from a known, clean git commit (not \"dev\", not dirty, not unknown)")
	cmd.Flags().StringVar(&agentBin, "agent", "", "install this drover-agent binary instead of building it from the checkout (with --init; the manifest records the override)")
	cmd.Flags().StringVar(&signKey, "sign-key", "", "sign the provenance with this ECDSA P-256 or Ed25519 private key (PEM) into <name>.provenance.dsse.json")
	cmd.Flags().StringVar(&initBin, "init", "", "use this drover-init binary instead of building it from the checkout (with --agent)")
	sb.register(cmd)
	return cmd
}
