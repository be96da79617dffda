package main

import (
	"context"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strings"
	"time"

	"github.com/spf13/cobra"

	"github.com/drover-os/drover/harness/cluster"
	"github.com/drover-os/drover/harness/conformance"
	"github.com/drover-os/drover/harness/ecsmeta"
	"github.com/drover-os/drover/harness/smoke"
	"github.com/drover-os/drover/image/cache"
	"github.com/drover-os/drover/image/debian"
	"github.com/drover-os/drover/image/lock"
)

func newConformanceCmd(g *globals) *cobra.Command {
	var version, cacheDir, work, junit string
	var plan conformance.Plan
	var buildOnly, lockImages bool
	var timeout time.Duration
	cmd := &cobra.Command{
		Use:   "conformance IMAGE.raw",
		Short: "Run Kubernetes' node conformance e2e tests against the image booted as an ECS instance",
		Long: `conformance judges an image by Kubernetes' own tests: the e2e suite's
[NodeConformance] specs (e2e.test, built from k8s.io/kubernetes/test/e2e at the
image's kubelet version through the Go module proxy and cached), with upstream's
usual skips ([Serial], [Slow], [Flaky], [Disruptive], [Alpha], [Feature:…]),
against the smoke harness's control plane (with kube-scheduler, and the API
server reaching the kubelet for logs, exec and port-forward) and the image
booted under QEMU as an ECS instance. The test images (agnhost from the
kubernetes module, busybox from Debian's busybox-static, glibc-dns-testing
from the Debian packages locked in
` + conformance.GlibcLockFile + `) are built here and served by
the harness registry; every registry the suite knows is mapped to it
(KUBE_TEST_REPO_LIST), so an image not built here is refused, never fetched.
--lock-test-images re-locks those packages (no IMAGE then).

It prints the table (passed, failed, skipped by reason, every failure), the
specs outside [NodeConformance] that a --focus ran, and the wall time of each
stage, and writes the suite's JUnit file with --junit. It exits 1 unless every
spec the run selected ran and passed (those outside [NodeConformance] too),
the suite's own steps passed and the suite exited 0; a focus that selects
nothing is an error too. docs/conformance.md explains the skips and the
failures.`,
		Example: `  drover conformance out/ecs-node.raw --junit out/conformance.xml
  drover conformance out/ecs-node.raw --focus 'Pods should get a host IP'
  drover conformance --lock-test-images`,
		Args: func(cmd *cobra.Command, args []string) error {
			if lockImages {
				return cobra.NoArgs(cmd, args)
			}
			return cobra.ExactArgs(1)(cmd, args)
		},
		RunE: func(cmd *cobra.Command, args []string) error {
			if lockImages {
				return lockTestImages(cmd.Context(), g)
			}
			image := args[0]
			var err error
			if version == "" {
				want, err := imageVersions(image)
				if err != nil {
					return err
				}
				version = want.Kubelet
			}
			if cacheDir == "" {
				if cacheDir, err = cache.DefaultDir(os.Getenv); err != nil {
					return err
				}
			}
			if work == "" {
				work = strings.TrimSuffix(image, filepath.Ext(image)) + ".conformance"
			}
			if err := plan.Validate(); err != nil {
				return err
			}
			os.RemoveAll(work)
			if err := os.MkdirAll(work, 0o755); err != nil {
				return err
			}
			ctx, cancel := context.WithTimeout(cmd.Context(), timeout)
			defer cancel()
			var stages []stage
			timed := func(name string, fn func() error) error {
				s := time.Now()
				err := fn()
				stages = append(stages, stage{name, time.Since(s)})
				return err
			}
			defer func() { printStages(os.Stderr, stages) }()

			var suite *smoke.Suite
			if err := timed("build (e2e.test, test images, control plane)", func() (err error) {
				suite, err = buildSuite(ctx, g, cacheDir, version, filepath.Join(work, "build.log"))
				return err
			}); err != nil {
				return err
			}
			e2e, images := suite.E2E, suite.Images
			if buildOnly {
				fmt.Fprintf(cmd.OutOrStdout(), "e2e.test %s\nginkgo %s\n", e2e, suite.Ginkgo)
				for _, im := range images {
					d, _ := im.Index.Digest()
					fmt.Fprintf(cmd.OutOrStdout(), "%s:%s %s (from %s)\n", im.Repo, im.Tag, d, im.From)
				}
				return nil
			}
			all, err := conformance.ListSpecs(ctx, e2e, work)
			if err != nil {
				return err
			}
			if n := len(plan.Selected(all)); n == 0 {
				return fmt.Errorf("--focus %q selects none of e2e.test's %d specs once the skips are applied "+
					"([Serial], [Slow], …; docs/conformance.md): it is a ginkgo regexp matched against the names "+
					"`%s --list-tests` prints; nothing was booted", plan.Focus, len(all), filepath.Join(work, "e2e.test"))
			}

			var env *smoke.Env
			var in *smoke.Instance
			if err := timed("control plane and registry", func() (err error) {
				env, err = smoke.Start(ctx, smoke.Options{WorkDir: work, CacheDir: cacheDir, Version: version, Log: os.Stderr, Conformance: true})
				return err
			}); err != nil {
				return err
			}
			defer env.Close()
			if err := timed("boot to Ready", func() error {
				ud, err := env.UserData()
				if err != nil {
					return err
				}
				meta := smoke.ECSInstance()
				meta.UserData = ud
				if in, err = env.Boot(ctx, image, filepath.Join(work, "vm"), false, meta, ecsmeta.Faults{}); err != nil {
					return err
				}
				jctx, jcancel := context.WithTimeout(ctx, 25*time.Minute)
				defer jcancel()
				return env.WaitJoined(jctx, in)
			}); err != nil {
				if in != nil {
					in.VM.Stop()
					return fmt.Errorf("%w; serial log %s", err, in.Config.SerialLog())
				}
				return err
			}
			defer in.VM.Stop()

			var res *conformance.Result
			if err := timed("suite", func() (err error) {
				res, err = conformance.Run(ctx, conformance.Target{Kubeconfig: env.Cluster.AdminKubeconfig(),
					Registry: env.Registry, GuestRegistry: env.GuestRegistry()}, images,
					conformance.Options{Specs: all, Ginkgo: suite.Ginkgo, WorkDir: work, Plan: plan, Log: os.Stderr})
				return err
			}); err != nil {
				return err
			}
			res.Print(cmd.OutOrStdout())
			// The registry's own record of what it answered: every
			// registry the suite knows is mapped to it, so an image not
			// built here is refused, never fetched elsewhere.
			own := make([]string, 0, len(env.Images))
			for ref := range env.Images {
				own = append(own, ref)
			}
			unbuilt, uerr := conformance.Unbuilt(env.Registry.Requests(), images, own...)
			fmt.Fprintf(cmd.OutOrStdout(), "registry: %d manifest(s) asked for that are not built here, with the registry's answer:\n", len(unbuilt))
			for _, u := range unbuilt {
				fmt.Fprintf(cmd.OutOrStdout(), "  %s\n", u)
			}
			if junit != "" {
				if err := copyFile(conformance.JUnitPath(work), junit); err != nil {
					return err
				}
			}
			if uerr != nil {
				return uerr
			}
			if err := res.Verdict(); err != nil {
				return fmt.Errorf("%w; the suite's log is %s, the node's serial log %s",
					err, filepath.Join(work, "e2e.log"), in.Config.SerialLog())
			}
			return nil
		},
	}
	f := cmd.Flags()
	f.StringVar(&version, "kubernetes-version", "", "Kubernetes version of the suite and control plane (default: the image's kubelet)")
	f.StringVar(&cacheDir, "cache", "", "cache for the built binaries and the busybox package (default $XDG_CACHE_HOME/drover)")
	f.StringVar(&work, "work", "", "work directory: cluster state, VM disk, the suite's log and report (default IMAGE.conformance)")
	f.StringVar(&junit, "junit", "", "copy the suite's JUnit XML here")
	f.StringVar(&plan.Focus, "focus", "", "ginkgo focus regexp instead of "+conformance.DefaultFocus+" (a subset; the table still counts every [NodeConformance] spec)")
	f.IntVar(&plan.Procs, "procs", 4, "parallel ginkgo processes (1: one spec after another); most of a spec's time on a TCG node is waiting, so several run side by side")
	f.BoolVar(&buildOnly, "build-only", false, "only build (or find in the cache) e2e.test and the test images, and list the images")
	f.DurationVar(&timeout, "timeout", 4*time.Hour, "overall limit")
	f.BoolVar(&lockImages, "lock-test-images", false, "resolve the Debian packages of the glibc-dns-testing test image again from the signed archive, as drover lock does, and write "+conformance.GlibcLockFile+" (run in a drover checkout, then rebuild drover, which embeds it); no IMAGE")
	return cmd
}

type stage struct {
	name string
	took time.Duration
}

func printStages(w io.Writer, stages []stage) {
	for _, s := range stages {
		fmt.Fprintf(w, "conformance: %-28s %s\n", s.name, s.took.Round(time.Second))
	}
}

func copyFile(src, dst string) error {
	data, err := os.ReadFile(src)
	if err != nil {
		return err
	}
	return os.WriteFile(dst, data, 0o644)
}

// buildSuite builds (or finds in the cache) what a run of the e2e suite
// needs before the node boots: e2e.test, the test images, and the control
// plane with kube-scheduler (so that none of it is compiled while the VM
// and its port are held). The go command's output goes to buildLog.
func buildSuite(ctx context.Context, g *globals, cacheDir, version, buildLog string) (*smoke.Suite, error) {
	mirror, err := debian.ResolveMirror(g.mirror, os.Getenv, os.DirFS("/"))
	if err != nil {
		return nil, fmt.Errorf("%w (pass --mirror URL or set DROVER_MIRROR): busybox comes from the Debian archive", err)
	}
	bl, err := os.Create(buildLog)
	if err != nil {
		return nil, err
	}
	defer bl.Close()
	e2e, err := cluster.BuildE2E(ctx, cacheDir, version, os.Stderr, bl)
	if err != nil {
		return nil, err
	}
	images, err := conformance.BuildImages(ctx, conformance.BuildOptions{CacheDir: cacheDir, Version: version,
		Mirror: mirror, Log: os.Stderr, BuildLog: bl})
	if err != nil {
		return nil, err
	}
	gk, err := cluster.BuildGinkgo(ctx, cacheDir, version, os.Stderr, bl)
	if err != nil {
		return nil, err
	}
	if _, err := cluster.BuildBinaries(ctx, cacheDir, version, os.Stderr, bl); err != nil {
		return nil, err
	}
	if _, err := cluster.BuildScheduler(ctx, cacheDir, version, os.Stderr, bl); err != nil {
		return nil, err
	}
	return &smoke.Suite{E2E: e2e, Ginkgo: gk, Images: images}, nil
}

// lockTestImages re-locks the glibc-dns-testing image's packages into the
// checkout's lock file, printing what changed.
func lockTestImages(ctx context.Context, g *globals) error {
	o, err := g.options(true)
	if err != nil {
		return err
	}
	old, err := os.ReadFile(conformance.GlibcLockFile)
	if err != nil {
		return fmt.Errorf("%w: run --lock-test-images at the root of a drover checkout", err)
	}
	text, err := conformance.LockGlibc(ctx, o)
	if err != nil {
		return err
	}
	removed, added := lock.Changes(old, text)
	if err := lock.Write(conformance.GlibcLockFile, text); err != nil {
		return err
	}
	fmt.Fprintf(g.log(), "%s: %d line(s) removed, %d added; rebuild drover to embed it\n", conformance.GlibcLockFile, len(removed), len(added))
	return nil
}
