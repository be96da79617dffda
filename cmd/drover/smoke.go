package main

import (
	"context"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"time"

	"github.com/spf13/cobra"

	"github.com/drover-os/drover/harness/smoke"
	"github.com/drover-os/drover/image/build"
	"github.com/drover-os/drover/image/cache"
)

func newSmokeCmd(g *globals) *cobra.Command {
	var p smoke.Plan
	var withConformance bool
	var work, junit, userdataFile, version, cacheDir string
	var pinCA bool
	var timeout time.Duration
	var keep bool
	var bench int
	var previous, record string
	var asJSON bool
	cmd := &cobra.Command{
		Use:   "smoke IMAGE.raw",
		Short: "Boot an image as an ECS instance against a local control plane; pass only if the node joins",
		Long: `smoke is the pipeline's pass/fail gate for an image. It starts a real local
control plane (etcd, kube-apiserver, kube-controller-manager built from the Go
module proxy at the image's kubelet version and cached), a local registry with
the test images, and the ECS metadata emulator in hardened mode; boots the image
under QEMU with SMBIOS "Alibaba Cloud ECS"; and checks:

  the node joins through kubelet TLS bootstrap and is Ready, with providerID
  <region>.<instance-id> and the region/zone/instance-type labels; a Pod from
  the local registry runs to completion; the kubelet listens on :10250 and
  nothing else on a non-loopback TCP or UDP socket (an offender is named with
  its process), there is no sshd, / and /usr are read-only and the bootstrap
  kubeconfig is gone; the CIS ACK 1.0 worker-node checks (docs/cis.md), judged
  on the running kubelet's command line and /configz and the real modes and
  owners of its files, each pass or do not apply (a failing check fails the
  smoke, naming its ID).
  --metadata-errors, --metadata-delay, --metadata-token-ttl: the metadata
  service fails, delays requests and expires a token during the first boot;
  the report counts each and requires every configured fault to have happened.
  --reboot: the node reboots with its disk moved to the other controller
  (NVMe <-> virtio-blk, as after a change of instance type) and is Ready
  again from its stored config; an edit made to /etc (read back before the
  reboot) is gone and a changed user-data is refused.
  --policy-check: a user-data that breaks the agent's policy is refused with a
  path-addressed error on the console and in the status file, and never joins.
  --conformance: on the first boot, about ten of Kubernetes' own e2e
  [NodeConformance] specs (pods, probes, volumes, exec, logs) must pass; the
  full set is drover conformance.
  An image with cached images (a recipe's images:, listed in its manifest):
  the cache disk image beside it (<name>.images.raw) is attached as the last
  data disk, the node file mirrors each cached image's registry host to the
  local registry, and once the agent reports DroverImageCache=True (and a pod
  of the first one's content under the registry's own name has run, and the
  kubelet's pull record of its image ID, read on the node, names that pull) a
  pod of each cached image must run while that registry refuses every request
  and sees none, containerd holding each pinned at its digest; a pod of an
  image the node does not hold shows the registry's refusal (503).

It prints each check and the boot timeline (guest seconds since boot), writes
JUnit XML with --junit, keeps the serial logs in the work directory, and exits 1
if any check failed.`,
		Example: `  drover smoke out/ecs-node.raw --reboot --policy-check --conformance --metadata-errors 0.3 --metadata-delay 2s --metadata-token-ttl 1s --junit out/smoke.xml`,
		Args:    cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			p.Image = args[0]
			want, err := imageVersions(p.Image)
			if err != nil {
				return err
			}
			p.Want = want
			if version == "" {
				version = want.Kubelet
			}
			if work == "" {
				work = strings.TrimSuffix(p.Image, filepath.Ext(p.Image)) + ".smoke"
			}
			os.RemoveAll(work)
			if err := os.MkdirAll(work, 0o755); err != nil {
				return err
			}
			if cacheDir == "" {
				d, err := cache.DefaultDir(os.Getenv)
				if err != nil {
					return err
				}
				cacheDir = d
			}
			if userdataFile != "" {
				data, err := os.ReadFile(userdataFile)
				if err != nil {
					return err
				}
				p.UserData = data
			}
			ctx, cancel := context.WithTimeout(cmd.Context(), timeout)
			defer cancel()
			if withConformance {
				s := time.Now()
				if p.Conformance, err = buildSuite(ctx, g, cacheDir, version, filepath.Join(work, "suite-build.log")); err != nil {
					return err
				}
				fmt.Fprintf(os.Stderr, "smoke: e2e.test and the test images ready in %s\n", time.Since(s).Round(time.Second))
			}
			env, err := smoke.Start(ctx, smoke.Options{WorkDir: work, CacheDir: cacheDir, Version: version, Log: os.Stderr, PinCA: pinCA, Conformance: withConformance})
			if err != nil {
				return err
			}
			defer env.Close()
			if bench > 0 {
				return printBench(cmd.OutOrStdout(), ctx, env, p, bench, previous, record)
			}
			report := env.Run(ctx, p)
			if asJSON {
				b, _ := json.MarshalIndent(report, "", "  ")
				fmt.Fprintln(cmd.OutOrStdout(), string(b))
			} else {
				report.Print(cmd.OutOrStdout())
			}
			if junit != "" {
				f, err := os.Create(junit)
				if err != nil {
					return err
				}
				if err := report.JUnit(f, "drover-smoke"); err != nil {
					return err
				}
				f.Close()
			}
			if keep {
				fmt.Fprintf(os.Stderr, "smoke: admin kubeconfig %s (the cluster stops when smoke exits)\n", env.Cluster.AdminKubeconfig())
			}
			if n := report.Failed(); n > 0 {
				return fmt.Errorf("%d of %d checks failed; serial logs in %s", n, len(report.Checks), work)
			}
			return nil
		},
	}
	f := cmd.Flags()
	f.StringVar(&work, "work", "", "work directory: cluster state, VM disks, serial logs (default IMAGE.smoke)")
	f.StringVar(&junit, "junit", "", "write JUnit XML here")
	f.StringVar(&userdataFile, "userdata", "", "user-data to boot with instead of one rendered for the local cluster")
	f.BoolVar(&pinCA, "ca-hash", false, "render the user-data with the cluster CA pinned by caHash (the join discovers the CA from signed cluster-info) instead of embedded")
	f.StringVar(&version, "kubernetes-version", "", "control plane version (default: the image's kubelet, from its manifest)")
	f.StringVar(&cacheDir, "cache", "", "cache for the control plane binaries (default $XDG_CACHE_HOME/drover)")
	f.Float64Var(&p.Metadata.ErrorRate, "metadata-errors", 0, "fraction of metadata requests answered 5xx/429 (fault injection)")
	f.DurationVar(&p.Metadata.Delay, "metadata-delay", 0, fmt.Sprintf("hold the first %d user-data/meta-data requests this long each", smoke.DelayedRequests))
	f.DurationVar(&p.Metadata.TokenTTL, "metadata-token-ttl", 0, "the first metadata token expires after this long, whatever TTL the node asked for")
	f.BoolVar(&p.NVMe, "nvme", false, "attach the disk as NVMe (the --reboot boot then uses virtio-blk)")
	f.BoolVar(&p.Reboot, "reboot", false, "also check a reboot with the disk on the other controller (stored config, /etc edit gone, changed user-data refused), then a reboot after a privileged pod edited the stored config (drift reported, its planted unit not run)")
	f.BoolVar(&withConformance, "conformance", false, "also run a subset of Kubernetes' e2e [NodeConformance] specs on the first boot (pods, probes, volumes, exec, logs; the list is conformance.Subset); builds e2e.test and the test images like drover conformance")
	f.BoolVar(&p.PolicyCheck, "policy-check", false, "also boot three instances that must not join: a policy-breaking user-data, a kubelet override dropped at run time (caught by the agent's effect check) and a double-gzipped user-data")
	f.DurationVar(&timeout, "timeout", 75*time.Minute, "overall limit")
	f.BoolVar(&keep, "print-kubeconfig", false, "print the admin kubeconfig path")
	f.BoolVar(&asJSON, "json", false, "print the checks and timelines as JSON")
	f.IntVar(&bench, "bench", 0, "instead of the checks: boot N fresh instances to Ready, reboot each, and print the median first-boot and reboot timelines with systemd's critical chains")
	f.StringVar(&previous, "bench-previous", "", "with --bench: a timeline table recorded earlier (bench/timeline-previous.txt) to print the figures against")
	f.StringVar(&record, "bench-record", "", "with --bench: write the median timeline table here")
	return cmd
}

// imageVersions reads what the image's manifest records of its kubelet and
// containerd: the versions the Node must report (and the kubelet's is the
// control plane's unless --kubernetes-version says otherwise).
func imageVersions(image string) (smoke.Versions, error) {
	mp := strings.TrimSuffix(image, filepath.Ext(image)) + ".manifest.json"
	data, err := os.ReadFile(mp)
	if err != nil {
		return smoke.Versions{}, fmt.Errorf("reading the image manifest for its kubelet and containerd versions: %w (build the image with drover build, which writes it beside the image)", err)
	}
	var m build.Manifest
	if err := json.Unmarshal(data, &m); err != nil {
		return smoke.Versions{}, fmt.Errorf("%s: %w", mp, err)
	}
	var v smoke.Versions
	for _, g := range m.Go {
		switch g.Name {
		case "kubelet":
			v.Kubelet = g.Version
		case "containerd":
			v.Containerd = g.Version
		}
	}
	if v.Kubelet == "" || v.Containerd == "" {
		return v, fmt.Errorf("%s records no kubelet or no containerd Go component (kubelet %q, containerd %q): is this a node image?", mp, v.Kubelet, v.Containerd)
	}
	if m.Sandbox == nil {
		return v, fmt.Errorf("%s records no sandbox image: the image predates drover shipping one; rebuild it with this drover", mp)
	}
	v.Sandbox, v.SandboxDigest = m.Sandbox.Name, m.Sandbox.Digest
	v.BuildID = m.BuildID
	if c := m.CachedImages; c != nil {
		for _, im := range c.Images {
			name, _, _ := strings.Cut(im.Ref, "@")
			v.Cached = append(v.Cached, smoke.CachedImage{Name: name, Digest: im.Digest, Location: im.Location})
		}
		if c.Disk != nil {
			v.CacheDisk = filepath.Join(filepath.Dir(image), c.Disk.File)
		}
	}
	return v, nil
}
