package main

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"time"

	"github.com/spf13/cobra"

	"github.com/drover-os/drover/harness/qemu"
)

func newRunCmd() *cobra.Command {
	var c qemu.Config
	var timeout time.Duration
	var until string
	var fresh bool
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
			if kvm, why := qemu.KVMUsable(); kvm {
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
			vm, err := qemu.Start(ctx, &c)
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
	f.Int64Var(&c.DiskSize, "disk-size", 4<<30, "size of the disk the instance sees (bytes)")
	f.IntVar(&c.MemoryMiB, "memory", 2048, "memory in MiB")
	f.IntVar(&c.CPUs, "cpus", 2, "virtual CPUs")
	f.DurationVar(&timeout, "timeout", 0, "stop the VM after this long (0: no limit)")
	f.StringVar(&until, "until", "", "stop with success once a console line contains this text")
	return cmd
}

func waitChan(vm *qemu.VM) <-chan error {
	ch := make(chan error, 1)
	go func() { ch <- vm.Wait() }()
	return ch
}
