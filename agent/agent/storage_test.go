package agent

import (
	"context"
	"errors"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/drover-os/drover/agent/status"
	"github.com/drover-os/drover/agent/storage"
)

func storageRig(t *testing.T, disks ...storage.Disk) (*rig, *storage.Fake, *Agent) {
	r := newRig(t, userData(t, "hello"))
	f := &storage.Fake{List: disks}
	a := r.agent()
	a.env.Storage = f
	return r, f, a
}

func phaseNamed(t *testing.T, root, name string) status.Phase {
	t.Helper()
	st, err := status.Read(root)
	if err != nil {
		t.Fatal(err)
	}
	for _, p := range st.Phases {
		if p.Name == name {
			return p
		}
	}
	t.Fatalf("no %s phase in %+v", name, st.Phases)
	return status.Phase{}
}

// The one empty disk is formatted, recorded ready and mounted before
// containerd starts; the disk holding a filesystem is untouched and
// reported on the Node once the node has joined.
func TestStorageOnTheEmptyDataDisk(t *testing.T) {
	ext4 := storage.Disk{Name: "vdc", Path: "/dev/vdc", Size: 1 << 30, Probe: storage.Probe{Found: true, Type: "ext4", UUID: "1111-2222"}}
	r, f, a := storageRig(t, storage.Disk{Name: "vdb", Path: "/dev/vdb", Size: 2 << 30}, ext4)
	if err := a.Run(context.Background()); err != nil {
		t.Fatalf("%v\n%s", err, strings.Join(r.log, "\n"))
	}
	if len(f.Formatted) != 1 || !strings.HasPrefix(f.Formatted[0], "/dev/vdb ") {
		t.Fatalf("formatted %q, want /dev/vdb only", f.Formatted)
	}
	uuid := strings.TrimPrefix(f.Formatted[0], "/dev/vdb ")
	rec, err := storage.ReadRecord(filepath.Join(r.root, DataDiskRecord))
	if err != nil || rec == nil || *rec != (storage.Record{UUID: uuid, State: storage.StateReady}) {
		t.Errorf("record %+v, %v; want %s ready", rec, err, uuid)
	}
	mounts := []string{`start var-lib-drover\x2ddata.mount`, "start var-lib-containerd.mount", "start var-lib-kubelet-pods.mount"}
	ctrd := slices.Index(r.sd.Calls, "start containerd.service")
	reload := slices.Index(r.sd.Calls, "reload")
	for _, m := range mounts {
		if i := slices.Index(r.sd.Calls, m); i < 0 || i > ctrd || i < reload || reload < 0 {
			t.Errorf("%s must follow a reload and precede containerd's start: %q", m, r.sd.Calls)
		}
	}
	unit, err := os.ReadFile(filepath.Join(r.root, storage.UnitDir, `var-lib-drover\x2ddata.mount`))
	if err != nil || !strings.Contains(string(unit), "What=/dev/vdb\n") {
		t.Errorf("data mount unit: %v\n%s", err, unit)
	}
	p := phaseNamed(t, r.root, "storage")
	if p.Result != "ok" || !strings.Contains(p.Detail, "container storage on /dev/vdb (2.0 GiB), formatted ext4 UUID "+uuid) ||
		!strings.Contains(p.Detail, "/dev/vdc holds ext4 (UUID 1111-2222): never touched") {
		t.Errorf("storage phase %+v", p)
	}
	if !slices.ContainsFunc(r.log, func(n string) bool { return strings.Contains(n, "storage: /dev/vdc holds ext4") }) {
		t.Errorf("no console note for /dev/vdc:\n%s", strings.Join(r.log, "\n"))
	}
	// The Event goes out with the kernel watch's, once joined.
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() { a.WatchHealth(ctx, HealthSources{Kmsg: &kmsgFake{}}); close(done) }()
	deadline := time.Now().Add(5 * time.Second)
	want := DataDiskNotUsed + ": /dev/vdc holds ext4 (UUID 1111-2222): never touched; container storage is on /dev/vdb. drover never writes to a disk that holds anything"
	for !slices.ContainsFunc(r.api.list(), func(e string) bool { return strings.HasPrefix(e, want) }) {
		if time.Now().After(deadline) {
			t.Fatalf("events %q, want one starting %q", r.api.list(), want)
		}
		time.Sleep(10 * time.Millisecond)
	}
	cancel()
	<-done
}

// A later boot finds the disk by its UUID under another name and mounts
// it without formatting.
func TestStorageLaterBootByUUID(t *testing.T) {
	const uuid = "3f1e1c5a-4b7e-4f0e-9d0a-0c1d2e3f4a5b"
	r, f, a := storageRig(t, storage.Disk{Name: "nvme1n1", Path: "/dev/nvme1n1", Size: 2 << 30, Probe: storage.Probe{Found: true, Type: "ext4", UUID: uuid}})
	if err := storage.WriteRecord(filepath.Join(r.root, DataDiskRecord), storage.Record{UUID: uuid, State: storage.StateReady}); err != nil {
		t.Fatal(err)
	}
	if err := a.Run(context.Background()); err != nil {
		t.Fatalf("%v\n%s", err, strings.Join(r.log, "\n"))
	}
	if len(f.Formatted) != 0 {
		t.Errorf("formatted %q on a later boot", f.Formatted)
	}
	unit, _ := os.ReadFile(filepath.Join(r.root, storage.UnitDir, `var-lib-drover\x2ddata.mount`))
	if !strings.Contains(string(unit), "What=/dev/nvme1n1\n") {
		t.Errorf("data mount unit:\n%s", unit)
	}
}

// The recorded disk is gone: the node does not join, and containerd
// never starts on the system disk.
func TestStorageRecordedDiskGone(t *testing.T) {
	r, _, a := storageRig(t)
	if err := storage.WriteRecord(filepath.Join(r.root, DataDiskRecord), storage.Record{UUID: "3f1e", State: storage.StateReady}); err != nil {
		t.Fatal(err)
	}
	err := a.Run(context.Background())
	if err == nil || !strings.Contains(err.Error(), "container storage: the data disk holding this node's container storage (ext4 UUID 3f1e") {
		t.Fatalf("want the refusal, got %v", err)
	}
	if slices.Contains(r.sd.Calls, "start containerd.service") {
		t.Errorf("containerd started: %q", r.sd.Calls)
	}
}

// No data disk: the system disk, recorded, no units, no reload.
func TestStorageNoDataDisk(t *testing.T) {
	r, _, a := storageRig(t)
	if err := a.Run(context.Background()); err != nil {
		t.Fatal(err)
	}
	if p := phaseNamed(t, r.root, "storage"); p.Detail != "container storage on the system disk: the instance has no data disk" {
		t.Errorf("storage phase %+v", p)
	}
	if slices.Contains(r.sd.Calls, "reload") {
		t.Errorf("reloaded without units: %q", r.sd.Calls)
	}
	rec, _ := storage.ReadRecord(filepath.Join(r.root, DataDiskRecord))
	if rec == nil || rec.State != storage.StateSystem {
		t.Errorf("record %+v, want system", rec)
	}
}

// mkfs fails: the phase fails naming it, and the record stays
// "formatting", so a later boot formats again.
func TestStorageFormatFails(t *testing.T) {
	r, f, a := storageRig(t, storage.Disk{Name: "vdb", Path: "/dev/vdb", Size: 2 << 30})
	f.FormatErr = errors.New("formatting /dev/vdb (mkfs.ext4 -U x): exit status 1")
	if err := a.Run(context.Background()); err == nil || !strings.Contains(err.Error(), "formatting /dev/vdb") {
		t.Fatalf("want the mkfs failure, got %v", err)
	}
	rec, _ := storage.ReadRecord(filepath.Join(r.root, DataDiskRecord))
	if rec == nil || rec.State != storage.StateFormatting {
		t.Errorf("record %+v, want formatting", rec)
	}
}

func TestNewUUID(t *testing.T) {
	u := newUUID()
	if len(u) != 36 || u[14] != '4' || !strings.ContainsAny(u[19:20], "89ab") || u == newUUID() {
		t.Errorf("newUUID() = %s", u)
	}
}

func (f *fakeAPI) list() []string {
	f.mu.Lock()
	defer f.mu.Unlock()
	return append([]string(nil), f.events...)
}
