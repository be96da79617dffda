package main

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"time"

	"github.com/spf13/cobra"

	"github.com/drover-os/drover/harness/ecsmeta"
	"github.com/drover-os/drover/harness/qemu"
	"github.com/drover-os/drover/harness/smoke"
	"github.com/drover-os/drover/image/cache"
)

func newRunCmd(g *globals) *cobra.Command {
	var c qemu.Config
	var timeout time.Duration
	var until, clusterMode, userdataFile, work string
	var fresh, ecs bool
	cmd := &cobra.Command{
		Use:   "run IMAGE.raw",
		Short: "Boot an image under QEMU (UEFI; KVM when usable, else software emulation)",
		Long: `run boots a drover disk image under QEMU with OVMF, the disk behind a
copy-on-write overlay in the state directory (the image itself is never
modified), the serial console on the terminal and in <state>/serial.log, and
user-mode networking. Booting the same state directory again is a reboot of
the same instance: /var is kept; --fresh starts a new instance.

It stops cleanly on Ctrl-C, on --timeout, or when the console shows the
--until text (exit 0), so it can be scripted.`,
		Example: `  drover run out/minimal.raw
  drover run --nvme --timeout 10m --until 'Reached target multi-user.target' out/minimal.raw`,
		Args: cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			c.Image = args[0]
			if c.StateDir == "" {
				c.StateDir = strings.TrimSuffix(args[0], filepath.Ext(args[0])) + ".run"
			}
			if fresh {
				os.RemoveAll(c.StateDir)
			}
			c.Console = cmd.OutOrStdout()
			if c.Arch == "" {
				a, err := qemu.ImageArch(c.Image)
				if err != nil {
					return err
				}
				c.Arch = a
			}
			if kvm, why := c.KVM(); kvm {
				fmt.Fprintln(cmd.ErrOrStderr(), "run: KVM is usable")
			} else {
				fmt.Fprintf(cmd.ErrOrStderr(), "run: KVM not usable (%s): software emulation, expect a slow boot\n", why)
			}
			ctx := cmd.Context()
			if timeout > 0 {
				var cancel context.CancelFunc
				ctx, cancel = context.WithTimeout(ctx, timeout)
				defer cancel()
			}
			var vm *qemu.VM
			var err error
			if len(c.ExtraArgs) > 0 && (ecs || clusterMode != "") {
				return fmt.Errorf("--qemu-arg works only without --ecs and --cluster (the ECS emulation builds its own QEMU command line)")
			}
			if ecs || clusterMode != "" {
				var env *smoke.Env
				vm, env, err = runECS(ctx, cmd, &c, clusterMode, userdataFile, work, g.cacheDir)
				if env != nil {
					defer env.Close()
				}
			} else {
				vm, err = startVM(ctx, cmd, &c)
			}
			if err != nil {
				return err
			}
			defer vm.Stop()
			if until != "" {
				if _, err := vm.WaitFor(ctx, until); err != nil {
					return fmt.Errorf("%w (serial log: %s)", err, c.SerialLog())
				}
				fmt.Fprintf(cmd.ErrOrStderr(), "run: console showed %q; stopping (serial log: %s)\n", until, c.SerialLog())
				return nil
			}
			select {
			case <-ctx.Done():
				fmt.Fprintf(cmd.ErrOrStderr(), "run: stopping (serial log: %s)\n", c.SerialLog())
				return nil
			case err := <-waitChan(vm):
				return err
			}
		},
	}
	f := cmd.Flags()
	f.StringVar(&c.StateDir, "state", "", "state directory: overlay disk, UEFI vars, serial log (default IMAGE.run)")
	f.BoolVar(&fresh, "fresh", false, "discard the state directory first (a new instance)")
	f.BoolVar(&c.NVMe, "nvme", false, "attach the disk as NVMe (as on newer ECS instance types) instead of virtio-blk")
	f.BoolVar(&c.SecureBoot, "secure-boot", false, "enforce UEFI Secure Boot (OVMF secboot firmware, db = Debian's snakeoil certificate "+qemu.SnakeoilCert+"): only images built with --secure-boot-key/--secure-boot-cert of that pair boot")
	f.Int64Var(&c.DiskSize, "disk-size", 4<<30, "size of the disk the instance sees (bytes)")
	f.IntVar(&c.MemoryMiB, "memory", 2048, "memory in MiB")
	f.IntVar(&c.CPUs, "cpus", 2, "virtual CPUs")
	f.DurationVar(&timeout, "timeout", 0, "stop the VM after this long (0: no limit)")
	f.StringVar(&until, "until", "", "stop with success once a console line contains this text")
	f.BoolVar(&ecs, "ecs", false, "run as an ECS instance: SMBIOS product \"Alibaba Cloud ECS\" and the metadata service emulated at 100.100.100.200")
	f.StringVar(&clusterMode, "cluster", "", "\"local\": start a local control plane and registry, and give the instance user-data that joins it (implies --ecs)")
	f.StringVar(&userdataFile, "userdata", "", "user-data the emulated metadata service serves (default with --cluster local: rendered for it)")
	f.StringVar(&work, "work", "", "work directory for --cluster local (default IMAGE.cluster)")
	f.StringArrayVar(&c.ExtraArgs, "qemu-arg", nil, "one more QEMU argument, after drover's own; repeat for each (not split at commas), e.g. --qemu-arg=-smbios --qemu-arg=type=11,value=io.systemd.stub.kernel-cmdline-extra=drover.debug")
	return cmd
}

// runECS boots the image as an ECS instance, with a local control plane
// (its binaries cached in cacheDir, default $XDG_CACHE_HOME/drover) when
// asked; it prints where the kubeconfig is.
func runECS(ctx context.Context, cmd *cobra.Command, c *qemu.Config, clusterMode, userdataFile, work, cacheDir string) (*qemu.VM, *smoke.Env, error) {
	if clusterMode != "" && clusterMode != "local" {
		return nil, nil, fmt.Errorf("--cluster %q: only \"local\" is supported", clusterMode)
	}
	if work == "" {
		work = strings.TrimSuffix(c.Image, filepath.Ext(c.Image)) + ".cluster"
	}
	if err := os.MkdirAll(work, 0o755); err != nil {
		return nil, nil, err
	}
	version := ""
	if clusterMode == "local" {
		v, err := imageVersions(c.Image)
		if err != nil {
			return nil, nil, err
		}
		version = v.Kubelet
	}
	if cacheDir == "" {
		d, err := cache.DefaultDir(os.Getenv)
		if err != nil {
			return nil, nil, err
		}
		cacheDir = d
	}
	env, err := smoke.StartECS(ctx, smoke.Options{WorkDir: work, CacheDir: cacheDir, Version: version, Log: cmd.ErrOrStderr(), Console: cmd.OutOrStdout()}, clusterMode == "local")
	if err != nil {
		return nil, env, err
	}
	meta := smoke.ECSInstance()
	if userdataFile != "" {
		if meta.UserData, err = os.ReadFile(userdataFile); err != nil {
			return nil, env, err
		}
	} else if env.Cluster != nil {
		if meta.UserData, err = env.UserData(); err != nil {
			return nil, env, err
		}
	}
	in, err := env.Boot(ctx, c.Image, c.StateDir, c.NVMe, meta, ecsmeta.Faults{})
	if err != nil {
		return nil, env, err
	}
	if env.Cluster != nil {
		fmt.Fprintf(cmd.ErrOrStderr(), "run: node %s joins %s; kubeconfig: %s\n", in.NodeName, env.Cluster.Server(), env.Cluster.AdminKubeconfig())
		fmt.Fprintf(cmd.ErrOrStderr(), "run:   KUBECONFIG=%s kubectl get nodes   (the cluster stops when drover run exits)\n", env.Cluster.AdminKubeconfig())
	}
	return in.VM, env, nil
}

func waitChan(vm *qemu.VM) <-chan error {
	ch := make(chan error, 1)
	go func() { ch <- vm.Wait() }()
	return ch
}

// startVM boots c, first resetting the UEFI variables if the disk moved to
// another controller since the state directory's last boot (see
// smoke.PrepareBus; env.Boot does the same for --ecs).
func startVM(ctx context.Context, cmd *cobra.Command, c *qemu.Config) (*qemu.VM, error) {
	moved, err := smoke.PrepareBus(c)
	if err != nil {
		return nil, err
	}
	if moved {
		fmt.Fprintf(cmd.ErrOrStderr(), "run: the disk is on another controller than at the last boot of %s: UEFI variables reset\n", c.StateDir)
	}
	return qemu.Start(ctx, c)
}
