package ecsapi

import (
	"context"
	"sync"
)

// InstanceSpec is what the emulator knows about an instance when a scaling
// group launches it: everything a launcher needs to boot the image with the
// launch template's user-data under an identity of its own.
type InstanceSpec struct {
	InstanceID   string
	RegionID     string
	ZoneID       string
	InstanceType string
	ImageID      string
	// ImageObject is the local file holding the bytes the image was imported
	// from (the OSS object), so a launcher can boot exactly what was published.
	ImageObject string
	// DataDisks are the local files of the image's data disks (its
	// DiskDeviceMapping.2… at import, the snapshots ECS keeps), in mapping
	// order: an instance created from the image gets a data disk of each.
	// They are the emulator's: a launcher attaches copies.
	DataDisks []string
	// UserData is the launch template's user-data, base64-decoded.
	UserData []byte
	Hostname string
}

// Launcher starts instances. The light stand-in launcher and the QEMU launcher
// live in other packages; the emulator only calls this.
type Launcher interface {
	// Launch starts the instance and returns once it is running (booting is
	// the instance's business). An error fails the scaling activity.
	Launch(ctx context.Context, spec InstanceSpec) (Instance, error)
}

// Instance is a launched instance.
type Instance interface {
	// Console returns the serial console output so far (GetInstanceConsoleOutput).
	Console() []byte
	// Stop powers the instance off; the emulator releases it afterwards.
	Stop(ctx context.Context) error
}

// LauncherFunc adapts a function to Launcher.
type LauncherFunc func(ctx context.Context, spec InstanceSpec) (Instance, error)

// Launch calls f.
func (f LauncherFunc) Launch(ctx context.Context, spec InstanceSpec) (Instance, error) {
	return f(ctx, spec)
}

// FakeInstance is an in-memory Instance for tests: its console is whatever
// the test writes, and it records whether it was stopped.
type FakeInstance struct {
	Spec InstanceSpec

	mu      sync.Mutex
	console []byte
	stopped bool
}

// WriteConsole appends to the console output.
func (f *FakeInstance) WriteConsole(b []byte) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.console = append(f.console, b...)
}

// Console implements Instance.
func (f *FakeInstance) Console() []byte {
	f.mu.Lock()
	defer f.mu.Unlock()
	return append([]byte(nil), f.console...)
}

// Stop implements Instance.
func (f *FakeInstance) Stop(context.Context) error {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.stopped = true
	return nil
}

// Stopped reports whether Stop was called.
func (f *FakeInstance) Stopped() bool {
	f.mu.Lock()
	defer f.mu.Unlock()
	return f.stopped
}
