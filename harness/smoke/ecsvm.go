package smoke

import (
	"context"
	"fmt"
	"net"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"time"

	"github.com/drover-os/drover/harness/ecsapi"
	"github.com/drover-os/drover/harness/ecsmeta"
	"github.com/drover-os/drover/harness/qemu"
)

// VMLauncher boots the emulated ECS's instances (harness/ecsapi) as QEMU
// VMs of the image the instance's image ID was imported from, each with a
// metadata emulator of its own serving the launch template's user-data and
// the instance's own ID, region and hostname, in hardened mode as a launch
// template with HttpTokens=required sets it.
type VMLauncher struct {
	env *Env
	dir string

	mu  sync.Mutex
	all map[string]*VMInstance
}

// Launcher returns a VMLauncher whose VMs keep their state under dir.
func (e *Env) Launcher(dir string) *VMLauncher {
	return &VMLauncher{env: e, dir: dir, all: map[string]*VMInstance{}}
}

// VMInstance is one instance booted by VMLauncher.
type VMInstance struct {
	Spec     ecsapi.InstanceSpec
	NodeName string
	VM       *qemu.VM
	meta     *ecsmeta.Server
	ln       net.Listener
}

// Instance returns the VM of an instance ID (nil: none launched).
func (l *VMLauncher) Instance(id string) *VMInstance {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.all[id]
}

// Launch boots spec's image. The VM outlives ctx: it runs until Stop.
func (l *VMLauncher) Launch(ctx context.Context, spec ecsapi.InstanceSpec) (ecsapi.Instance, error) {
	if spec.ImageObject == "" {
		return nil, fmt.Errorf("instance %s: image %s has no imported disk to boot", spec.InstanceID, spec.ImageID)
	}
	meta := ECSInstance()
	meta.InstanceID, meta.RegionID, meta.ImageID = spec.InstanceID, spec.RegionID, spec.ImageID
	if spec.ZoneID != "" {
		meta.ZoneID = spec.ZoneID
	}
	if spec.InstanceType != "" {
		meta.InstanceType = spec.InstanceType
	}
	meta.Hostname = spec.Hostname
	if meta.Hostname == "" {
		meta.Hostname = spec.InstanceID
	}
	meta.UserData = spec.UserData
	srv := ecsmeta.New(meta, ecsmeta.Options{TokenEndpoint: true, TokenRequired: true})
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return nil, err
	}
	go srv.Serve(ln)
	cfg := l.env.VMConfig(spec.ImageObject, filepath.Join(l.dir, spec.InstanceID), false)
	if cfg.DataDisks, err = instanceDataDisks(spec, cfg.StateDir); err != nil {
		srv.Close()
		return nil, err
	}
	cfg.GuestFwd = map[string]string{MetadataAddr: l.env.opts.Drover + " relay " + ln.Addr().String()}
	// No host forward of the kubelet: it is one host port, and several
	// instances run at once; nothing execs into these nodes.
	cfg.HostFwd = nil
	// Several instances run at once on a small host. One vCPU each: three
	// VMs of two vCPUs oversubscribe two host cores anyway, and with one
	// there is no cross-vCPU code patching, which under multi-threaded
	// TCG can oops the guest (int3 in hash_conntrack_raw as a static key
	// flipped, seen once here with two vCPUs).
	cfg.MemoryMiB, cfg.CPUs = 2048, 1
	if _, err := PrepareBus(cfg); err != nil {
		srv.Close()
		return nil, err
	}
	// The VM belongs to the emulated instance, not to the API call that
	// launched it.
	vm, err := qemu.Start(context.WithoutCancel(ctx), cfg)
	if err != nil {
		srv.Close()
		return nil, fmt.Errorf("instance %s: %w", spec.InstanceID, err)
	}
	in := &VMInstance{Spec: spec, NodeName: strings.ToLower(meta.Hostname), VM: vm, meta: srv, ln: ln}
	l.mu.Lock()
	l.all[spec.InstanceID] = in
	l.mu.Unlock()
	l.env.logf("instance %s: booting %s (image %s, %d data disks) as QEMU VM, serial log %s", spec.InstanceID, filepath.Base(spec.ImageObject), spec.ImageID, len(cfg.DataDisks), cfg.SerialLog())
	return in, nil
}

// instanceDataDisks copies the image's data disks (the emulator's files of
// its DiskDeviceMapping.2…) into the instance's directory, sparse, in
// mapping order: on ECS each instance gets disks of its own made from the
// image's snapshots, so the guest must not write the emulator's files or
// another instance's. They are attached after the system disk.
func instanceDataDisks(spec ecsapi.InstanceSpec, dir string) ([]string, error) {
	if len(spec.DataDisks) == 0 {
		return nil, nil
	}
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return nil, err
	}
	var out []string
	for i, src := range spec.DataDisks {
		dst, err := copyCacheDisk(src, dir)
		if err != nil {
			return nil, fmt.Errorf("instance %s: data disk %d of image %s: %w", spec.InstanceID, i+1, spec.ImageID, err)
		}
		out = append(out, dst)
	}
	return out, nil
}

// Console is the serial console, what GetInstanceConsoleOutput returns.
func (in *VMInstance) Console() []byte { return []byte(in.VM.Log()) }

// Stop presses the power button, as ECS StopInstance does, and forces the
// stop after two minutes.
func (in *VMInstance) Stop(ctx context.Context) error {
	err := in.VM.Shutdown(2 * time.Minute)
	in.meta.Close()
	return err
}

// StopAll stops every instance still running (test cleanup).
func (l *VMLauncher) StopAll() {
	l.mu.Lock()
	all := make([]*VMInstance, 0, len(l.all))
	for _, in := range l.all {
		all = append(all, in)
	}
	l.mu.Unlock()
	for _, in := range all {
		in.VM.Stop()
		in.meta.Close()
	}
}
