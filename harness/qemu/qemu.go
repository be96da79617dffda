// Package qemu boots a drover image under QEMU the way ECS would run it:
// UEFI (OVMF), the disk behind a copy-on-write overlay so the image is never
// modified, serial console to a log, user-mode networking, optional NVMe,
// optional SMBIOS product name and metadata-service forwarding, optional
// UEFI Secure Boot. KVM is used when it is usable, software emulation (TCG)
// otherwise.
package qemu

import (
	"bufio"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"maps"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"runtime"
	"slices"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"time"

	"golang.org/x/sys/unix"

	"github.com/drover-os/drover/image/arch"
	"github.com/drover-os/drover/image/gpt"
)

// Config describes one VM.
type Config struct {
	Image     string // raw image (never written)
	StateDir  string // overlay disk, OVMF vars and logs; kept across boots of the same VM
	DiskSize  int64  // overlay size (the disk the instance sees); 0 = 4 GiB
	MemoryMiB int    // default 2048
	CPUs      int    // default 2
	NVMe      bool   // attach the disk as NVMe instead of virtio-blk
	// PreallocMemory has QEMU allocate and touch all of the guest's
	// memory before it starts (-mem-prealloc), as an ECS instance's
	// memory is there from its start. On a host that backs its own memory
	// lazily (this machine is itself a VM), first touches are slow: the
	// smoke bench's first instances after the host had been idle took 4-5 s
	// longer to Ready than its later ones, in every phase, and with the
	// memory preallocated they did not. The bench boots with it, so the
	// timeline is the guest's.
	PreallocMemory bool
	// DataDisks are host raw files attached after the boot disk, in
	// order, as the instance's data disks (virtio-blk, or NVMe with
	// NVMe), with serials drover-data1, drover-data2, …; the guest writes
	// them.
	DataDisks []string
	// Net is the user-mode network, e.g. 100.64.0.0/10 so that the ECS
	// metadata address 100.100.100.200 lies inside it (slirp only
	// forwards guest connections to addresses in its network).
	Net string
	// Host and DHCPStart fix the host's address as the guest sees it and
	// the guest's first DHCP address (QEMU's defaults put them at .2.2
	// and .2.15 of the network).
	Host, DHCPStart string
	// GuestFwd maps a guest address:port to a command whose stdin/stdout
	// carry each connection (QEMU's guestfwd=…-cmd:…).
	GuestFwd map[string]string
	// HostFwd maps a host address:port to a guest TCP port (QEMU's
	// hostfwd=tcp:…-:port): the way the host reaches a guest service on
	// user-mode networking, e.g. the kubelet's :10250 for the API
	// server's logs, exec and port-forward.
	HostFwd map[string]int
	// ProductName sets SMBIOS type 1 product (e.g. "Alibaba Cloud ECS").
	ProductName string
	FwCfg       map[string]string // name -> file
	Console     io.Writer         // serial console copy (e.g. os.Stdout); the log is always written
	QEMU        string            // default qemu-system-x86_64, qemu-system-aarch64 for arm64
	OVMFCode    string            // default /usr/share/OVMF/OVMF_CODE_4M.fd (or OVMF_CODE.fd), /usr/share/AAVMF/AAVMF_CODE.fd for arm64
	OVMFVars    string            // template, default beside the code (the snakeoil one with SecureBoot)
	// SecureBoot boots with Secure Boot enforced: the firmware build with
	// SMM-protected variables (OVMF_CODE_4M.secboot.fd, on a q35 machine
	// with SMM and a secure flash) and, by default, Debian's
	// OVMF_VARS_4M.snakeoil.fd, whose PK, KEK and db hold the snakeoil
	// certificate /usr/share/ovmf/PkKek-1-snakeoil.pem (SnakeoilKey and
	// SnakeoilCert): images signed with it boot, others are refused.
	SecureBoot bool
	// Arch is the image's Debian architecture: amd64 boots a q35 machine
	// with OVMF, arm64 a virt machine with AAVMF (Debian's
	// qemu-efi-aarch64), emulated (TCG) on any other host. Empty: read
	// from the image's DPS root partition type (ImageArch).
	Arch string
	// ExtraArgs go to QEMU after all of its own, as given (e.g. "-smbios",
	// "type=11,value=io.systemd.stub.kernel-cmdline-extra=…").
	ExtraArgs []string
}

// Debian's ovmf test key pair enrolled in OVMF_VARS_4M.snakeoil.fd. The key
// is encrypted with the passphrase "snakeoil" (README.Debian of ovmf).
const (
	SnakeoilKey  = "/usr/share/ovmf/PkKek-1-snakeoil.key"
	SnakeoilCert = "/usr/share/ovmf/PkKek-1-snakeoil.pem"
)

// SerialLog is the serial console log's path in the state dir.
func (c *Config) SerialLog() string { return filepath.Join(c.StateDir, "serial.log") }

// Overlay is the copy-on-write disk's path in the state dir.
func (c *Config) Overlay() string { return filepath.Join(c.StateDir, "disk.qcow2") }

// KVMUsable reports whether /dev/kvm can create a VM here. KVM may be
// present but unusable (nested virtualisation off, no permission).
func KVMUsable() (bool, string) {
	f, err := os.OpenFile("/dev/kvm", os.O_RDWR, 0)
	if err != nil {
		return false, err.Error()
	}
	defer f.Close()
	const kvmGetAPIVersion, kvmCreateVM = 0xAE00, 0xAE01
	v, err := unix.IoctlRetInt(int(f.Fd()), kvmGetAPIVersion)
	if err != nil || v != 12 {
		return false, fmt.Sprintf("KVM_GET_API_VERSION: %v %v", v, err)
	}
	vm, err := unix.IoctlRetInt(int(f.Fd()), kvmCreateVM)
	if err != nil {
		return false, "KVM_CREATE_VM: " + err.Error()
	}
	unix.Close(vm)
	return probeQEMU()
}

// KVM reports whether this VM can use KVM: only an image of the host's
// own architecture can, and only when KVMUsable.
func (c *Config) KVM() (bool, string) {
	if c.Arch != "" && c.Arch != hostArch {
		return false, fmt.Sprintf("%s image on this %s host", c.Arch, hostArch)
	}
	return KVMUsable()
}

var probe struct {
	once sync.Once
	ok   bool
	why  string
}

// probeQEMU starts QEMU with KVM for two seconds: on some hosts /dev/kvm
// answers but QEMU aborts setting up the vCPU (e.g. "failed to set MSR").
// Surviving two seconds means KVM works.
func probeQEMU() (bool, string) {
	probe.once.Do(func() {
		c := &Config{}
		if err := c.defaultsNoDir(); err != nil {
			probe.why = err.Error()
			return
		}
		ctx, cancel := context.WithTimeout(context.Background(), 2*time.Second)
		defer cancel()
		cmd := exec.CommandContext(ctx, c.QEMU, "-machine", "q35,accel=kvm", "-cpu", "host", "-m", "128",
			"-nodefaults", "-display", "none", "-no-reboot",
			"-drive", "if=pflash,format=raw,readonly=on,file="+c.OVMFCode)
		out, err := cmd.CombinedOutput()
		if ctx.Err() != nil {
			probe.ok = true
			return
		}
		probe.why = fmt.Sprintf("qemu with KVM exited at once (%v): %s", err, strings.TrimSpace(lastLine(string(out))))
	})
	return probe.ok, probe.why
}

func lastLine(s string) string {
	lines := strings.Split(strings.TrimSpace(s), "\n")
	return lines[len(lines)-1]
}

func firstExisting(paths ...string) string {
	for _, p := range paths {
		if _, err := os.Stat(p); err == nil {
			return p
		}
	}
	return ""
}

func (c *Config) defaults() error {
	if c.Arch == "" && c.Image != "" {
		a, err := ImageArch(c.Image)
		if err != nil {
			return err
		}
		c.Arch = a
	}
	if err := c.defaultsNoDir(); err != nil {
		return err
	}
	return os.MkdirAll(c.StateDir, 0o755)
}

// ImageArch reads the Debian architecture of a drover disk image from its
// GPT: the Discoverable Partitions Specification root partition type
// (root-x86-64 → amd64, root-arm64 → arm64).
func ImageArch(image string) (string, error) {
	f, err := os.Open(image)
	if err != nil {
		return "", err
	}
	defer f.Close()
	fi, err := f.Stat()
	if err != nil {
		return "", err
	}
	layout, _, err := gpt.ReadLayout(f, fi.Size())
	if err != nil {
		return "", fmt.Errorf("reading the GPT of %s: %w", image, err)
	}
	for _, name := range arch.Names() {
		a, _ := arch.Lookup(name)
		root, _, _ := gpt.RootTypes(gpt.Arch(a.DPS))
		for _, p := range layout.Parts {
			if strings.EqualFold(p.Type, root) {
				return a.Debian, nil
			}
		}
	}
	return "", fmt.Errorf("%s has no DPS root partition of a known architecture (%s): is it a drover image?", image, strings.Join(arch.Names(), ", "))
}

// arm64 reports whether the VM is an Arm one.
func (c *Config) arm64() bool { return c.Arch == arch.ARM64.Debian }

// hostArch is the Debian architecture of this machine.
var hostArch = runtime.GOARCH

func (c *Config) defaultsNoDir() error {
	if c.DiskSize == 0 {
		c.DiskSize = 4 << 30
	}
	if c.MemoryMiB == 0 {
		c.MemoryMiB = 2048
	}
	if c.CPUs == 0 {
		c.CPUs = 2
	}
	if c.arm64() {
		return c.defaultsArm64()
	}
	if c.QEMU == "" {
		c.QEMU = "qemu-system-x86_64"
	}
	switch {
	case c.OVMFCode != "":
	case c.SecureBoot:
		// The 4 MiB builds only: the secboot code needs vars of its size.
		c.OVMFCode = firstExisting("/usr/share/OVMF/OVMF_CODE_4M.secboot.fd")
	default:
		c.OVMFCode = firstExisting("/usr/share/OVMF/OVMF_CODE_4M.fd", "/usr/share/OVMF/OVMF_CODE.fd")
	}
	switch {
	case c.OVMFVars != "":
		// e.g. OVMF_VARS_4M.fd with SecureBoot: no keys, setup mode,
		// where systemd-boot enrols the image's own
	case c.SecureBoot:
		c.OVMFVars = firstExisting("/usr/share/OVMF/OVMF_VARS_4M.snakeoil.fd")
	default:
		c.OVMFVars = firstExisting("/usr/share/OVMF/OVMF_VARS_4M.fd", "/usr/share/OVMF/OVMF_VARS.fd")
	}
	if c.OVMFCode == "" || c.OVMFVars == "" {
		if c.SecureBoot {
			return errors.New("no OVMF_CODE_4M.secboot.fd and OVMF_VARS_4M.snakeoil.fd in /usr/share/OVMF: install the Debian package ovmf (scripts/host-setup.sh)")
		}
		return errors.New("no OVMF firmware in /usr/share/OVMF: install the Debian package ovmf (scripts/host-setup.sh)")
	}
	if _, err := exec.LookPath(c.QEMU); err != nil {
		return fmt.Errorf("%s not found: install the Debian package qemu-system-x86 (scripts/host-setup.sh)", c.QEMU)
	}
	return nil
}

// defaultsArm64 picks qemu-system-aarch64 and Debian's AAVMF (EDK II for
// QEMU's virt machine, 64 MiB flash images).
func (c *Config) defaultsArm64() error {
	if c.SecureBoot {
		return errors.New("Secure Boot boots are amd64 only (OVMF with SMM); boot the arm64 image without --secure-boot")
	}
	if c.QEMU == "" {
		c.QEMU = "qemu-system-aarch64"
	}
	if c.OVMFCode == "" {
		c.OVMFCode = firstExisting("/usr/share/AAVMF/AAVMF_CODE.fd")
	}
	if c.OVMFVars == "" {
		c.OVMFVars = firstExisting("/usr/share/AAVMF/AAVMF_VARS.fd")
	}
	if c.OVMFCode == "" || c.OVMFVars == "" {
		return errors.New("no AAVMF firmware in /usr/share/AAVMF: install the Debian package qemu-efi-aarch64 (scripts/host-setup.sh)")
	}
	if _, err := exec.LookPath(c.QEMU); err != nil {
		return fmt.Errorf("%s not found: install the Debian package qemu-system-arm (scripts/host-setup.sh)", c.QEMU)
	}
	return nil
}

// Prepare creates the overlay disk and the UEFI variable store once; later
// boots of the same state dir reuse them (a reboot keeps /var).
func (c *Config) Prepare(ctx context.Context) error {
	if err := c.defaults(); err != nil {
		return err
	}
	img, err := filepath.Abs(c.Image)
	if err != nil {
		return err
	}
	if _, err := os.Stat(c.Overlay()); os.IsNotExist(err) {
		out, err := exec.CommandContext(ctx, "qemu-img", "create", "-q", "-f", "qcow2", "-F", "raw", "-b", img,
			c.Overlay(), strconv.FormatInt(c.DiskSize, 10)).CombinedOutput()
		if err != nil {
			return fmt.Errorf("creating the overlay disk: %v: %s", err, out)
		}
	}
	vars := filepath.Join(c.StateDir, "OVMF_VARS.fd")
	if _, err := os.Stat(vars); os.IsNotExist(err) {
		data, err := os.ReadFile(c.OVMFVars)
		if err != nil {
			return err
		}
		if err := os.WriteFile(vars, data, 0o644); err != nil {
			return err
		}
	}
	return nil
}

// Args returns the QEMU command line.
func (c *Config) Args(kvm bool) []string {
	accel := "tcg,thread=multi"
	cpu := "max"
	if kvm {
		accel, cpu = "kvm", "host"
	}
	machine := "q35"
	if c.arm64() {
		// The virt machine has PCIe, so the disk, NIC and RNG are the same
		// PCI devices as on q35; its serial port is a PL011 (ttyAMA0).
		// pauth-impdef: TCG's QARMA pointer authentication dominates an
		// emulated arm64 boot; the implementation-defined algorithm is
		// many times faster and invisible to the guest.
		machine, cpu = "virt", "max,pauth-impdef=on"
	}
	if c.SecureBoot {
		// The secboot firmware keeps its variables in SMM; without SMM and
		// a secure flash it stops at once.
		machine = "q35,smm=on"
	}
	// -nodefaults: no default CD-ROM drive, which an ECS instance does not
	// have either; on q35 it made every boot load the ATAPI, SCSI CD-ROM
	// and sg drivers and run udev's cdrom_id, ata_id and scsi_id while
	// the node waited for DHCP. The devices the command line names, and
	// on x86 the standard VGA an ECS console shows, are all it has.
	a := []string{
		"-name", "drover", "-machine", machine, "-accel", accel, "-cpu", cpu,
		"-smp", strconv.Itoa(c.CPUs), "-m", strconv.Itoa(c.MemoryMiB),
		"-nodefaults", "-nographic", "-no-reboot",
	}
	if c.PreallocMemory {
		a = append(a, "-mem-prealloc")
	}
	if !c.arm64() {
		a = append(a, "-vga", "std")
	}
	if c.SecureBoot {
		a = append(a, "-global", "driver=cfi.pflash01,property=secure,value=on")
	}
	a = append(a,
		"-drive", "if=pflash,format=raw,readonly=on,file="+c.OVMFCode,
		"-drive", "if=pflash,format=raw,file="+filepath.Join(c.StateDir, "OVMF_VARS.fd"),
		"-drive", "if=none,id="+BootDisk+",format=qcow2,file="+c.Overlay(),
		"-serial", "stdio", "-monitor", "none",
		"-qmp", "unix:"+c.qmpPath()+",server=on,wait=off",
	)
	if c.NVMe {
		a = append(a, "-device", "nvme,drive="+BootDisk+",serial=drover0")
	} else {
		a = append(a, "-device", "virtio-blk-pci,drive="+BootDisk)
	}
	for i, f := range c.DataDisks {
		id := fmt.Sprintf("data%d", i+1)
		dev := "virtio-blk-pci"
		if c.NVMe {
			dev = "nvme"
		}
		// A comma in a path is doubled, QEMU's escape in option values.
		a = append(a, "-drive", "if=none,id="+id+",format=raw,file="+strings.ReplaceAll(f, ",", ",,"),
			"-device", fmt.Sprintf("%s,drive=%s,serial=drover-data%d", dev, id, i+1))
	}
	netdev := "user,id=n0"
	if c.Net != "" {
		netdev += ",net=" + c.Net
	}
	if c.Host != "" {
		netdev += ",host=" + c.Host
	}
	if c.DHCPStart != "" {
		netdev += ",dhcpstart=" + c.DHCPStart
	}
	for addr, cmd := range c.GuestFwd {
		netdev += ",guestfwd=tcp:" + addr + "-cmd:" + cmd
	}
	for _, addr := range slices.Sorted(maps.Keys(c.HostFwd)) {
		netdev += fmt.Sprintf(",hostfwd=tcp:%s-:%d", addr, c.HostFwd[addr])
	}
	a = append(a, "-netdev", netdev, "-device", "virtio-net-pci,netdev=n0,mac=52:54:00:12:34:56")
	if c.ProductName != "" {
		a = append(a, "-smbios", "type=1,manufacturer=Alibaba Cloud,product="+c.ProductName)
	}
	for name, file := range c.FwCfg {
		a = append(a, "-fw_cfg", "name="+name+",file="+file)
	}
	a = append(a, "-device", "virtio-rng-pci")
	return append(a, c.ExtraArgs...)
}

// ansi matches terminal escape sequences (systemd colours its status
// lines), so the log and the patterns are plain text.
var ansi = regexp.MustCompile(`\x1b\[[0-9;?]*[A-Za-z]`)

// VM is a running QEMU.
type VM struct {
	cmd     *exec.Cmd
	qmp     string
	done    chan struct{} // closed when QEMU exited
	exitErr error
	mu      sync.Mutex
	log     strings.Builder
	subs    []chan string
	serial  *os.File // the serial log file, for the harness's own notes
	resetAt int      // length of log after the reset note (0: never reset)
}

// Start boots the VM. The serial console is copied to the log file, to
// c.Console and to Wait* callers.
func Start(ctx context.Context, c *Config) (*VM, error) {
	if err := c.Prepare(ctx); err != nil {
		return nil, err
	}
	kvm, _ := c.KVM()
	cmd := exec.Command(c.QEMU, c.Args(kvm)...)
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true, Pdeathsig: syscall.SIGKILL}
	logf, err := os.OpenFile(c.SerialLog(), os.O_CREATE|os.O_WRONLY|os.O_APPEND, 0o644)
	if err != nil {
		return nil, err
	}
	out, err := cmd.StdoutPipe()
	if err != nil {
		return nil, err
	}
	cmd.Stderr = cmd.Stdout
	if err := cmd.Start(); err != nil {
		return nil, fmt.Errorf("starting qemu: %w", err)
	}
	vm := &VM{cmd: cmd, qmp: c.qmpPath(), done: make(chan struct{}), serial: logf}
	go func() {
		sc := bufio.NewScanner(out)
		sc.Buffer(make([]byte, 64<<10), 1<<20)
		for sc.Scan() {
			line := ansi.ReplaceAllString(strings.TrimRight(sc.Text(), "\r"), "")
			fmt.Fprintln(logf, line)
			if c.Console != nil {
				fmt.Fprintln(c.Console, line)
			}
			vm.mu.Lock()
			vm.log.WriteString(line + "\n")
			for _, s := range vm.subs {
				select {
				case s <- line:
				default:
				}
			}
			vm.mu.Unlock()
		}
		logf.Close()
		vm.exitErr = cmd.Wait()
		close(vm.done)
	}()
	return vm, nil
}

// Log returns the console output so far.
func (vm *VM) Log() string {
	vm.mu.Lock()
	defer vm.mu.Unlock()
	return vm.log.String()
}

// KernelPanic is the guest kernel's own line when it panics. A panicked
// guest never prints what a caller waits for; under emulation it also
// may not reset (a panic in interrupt context hangs the vCPU), so WaitFor
// fails on it at once instead of at the caller's deadline.
const KernelPanic = "Kernel panic - not syncing"

// panicTrailer starts the line that ends a panic's report.
const panicTrailer = "---[ end " + KernelPanic

// kernelRunsInit is the kernel's line as it starts the initrd's init: from
// here on the image's own code runs.
const kernelRunsInit = "Run /init as init process"

// WaitFor waits until a console line contains one of the patterns and
// returns the pattern that matched, or fails when the VM exits, the guest
// kernel panics (unless a pattern asks for that line) or ctx ends.
//
// A panic before the kernel ran /init (nothing of the image but the
// kernel had run) resets the machine once instead: under TCG the guest
// kernel's early boot hits emulator races that no real CPU has, e.g. an
// int3 oops from cross-vCPU code patching ("Oops: int3 … RIP:
// sched_clock_idle_wakeup_event") or "IO-APIC + timer doesn't work!". The
// reset and its reason go to the console log; a second panic, or one
// after /init started, fails.
func (vm *VM) WaitFor(ctx context.Context, patterns ...string) (string, error) {
	ch := make(chan string, 4096)
	watchPanic := true
	for _, p := range patterns {
		if strings.Contains(KernelPanic, p) {
			watchPanic = false
		}
	}
	// match returns the pattern a line shows, or the panic as an error.
	match := func(line string) (string, error) {
		for _, p := range patterns {
			if strings.Contains(line, p) {
				return p, nil
			}
		}
		// "---[ end Kernel panic …" closes the report of a panic already
		// seen (after an early panic's reset, the dying kernel may still
		// print it): it is never a panic of its own.
		if watchPanic && strings.Contains(line, KernelPanic) && !strings.Contains(line, panicTrailer) {
			if vm.resetEarlyPanic(line) {
				return "", nil
			}
			return "", fmt.Errorf("the guest kernel panicked before the console showed %q: %s", patterns, strings.TrimSpace(line))
		}
		return "", nil
	}
	vm.mu.Lock()
	past := vm.log.String()[vm.resetAt:]
	vm.subs = append(vm.subs, ch)
	vm.mu.Unlock()
	for _, line := range strings.Split(past, "\n") {
		if p, err := match(line); p != "" || err != nil {
			return p, err
		}
	}
	for {
		select {
		case line := <-ch:
			if p, err := match(line); p != "" || err != nil {
				return p, err
			}
		case <-vm.done:
			return "", fmt.Errorf("VM exited (%v) before the console showed %q", vm.exitErr, patterns)
		case <-ctx.Done():
			return "", fmt.Errorf("console did not show %q: %w", patterns, ctx.Err())
		}
	}
}

// resetEarlyPanic resets the machine over QMP if the console's panic line
// came before the kernel ran /init and the VM was not reset before; it
// says whether it did (concurrent waiters reset once).
func (vm *VM) resetEarlyPanic(line string) bool {
	vm.mu.Lock()
	defer vm.mu.Unlock()
	log := vm.log.String()
	if vm.resetAt > 0 && !strings.Contains(log[vm.resetAt:], KernelPanic) {
		return true // reset already, by another waiter, for this line
	}
	if vm.resetAt > 0 || strings.Contains(log, kernelRunsInit) {
		return false
	}
	// -no-reboot makes every reset, a QMP one too, end QEMU: the reset
	// action is "reset" for this one reset only.
	if err := vm.qmpCommand(`{"execute":"set-action","arguments":{"reboot":"reset"}}`, `{"execute":"system_reset"}`,
		`{"execute":"set-action","arguments":{"reboot":"shutdown"}}`); err != nil {
		return false
	}
	why := strings.TrimSpace(line[strings.Index(line, KernelPanic)+len(KernelPanic):])
	note := "qemu: the guest kernel panicked before it ran /init (" + strings.TrimLeft(why, ": ") + "), an emulator race under TCG: machine reset once (QMP system_reset)"
	vm.log.WriteString(note + "\n")
	vm.resetAt = vm.log.Len()
	if vm.serial != nil {
		fmt.Fprintln(vm.serial, note)
	}
	return true
}

// Resets says how many times WaitFor reset the machine after an early
// kernel panic (0 or 1).
func (vm *VM) Resets() int {
	vm.mu.Lock()
	defer vm.mu.Unlock()
	if vm.resetAt > 0 {
		return 1
	}
	return 0
}

// qmpCommand runs QMP commands (JSON objects) in order, each answered
// before the next; event lines in between are skipped.
func (vm *VM) qmpCommand(cmds ...string) error {
	_, err := vm.qmpQuery(cmds...)
	return err
}

// qmpQuery is qmpCommand returning the last command's "return" value.
func (vm *VM) qmpQuery(cmds ...string) (json.RawMessage, error) {
	conn, err := net.DialTimeout("unix", vm.qmp, 5*time.Second)
	if err != nil {
		return nil, err
	}
	defer conn.Close()
	conn.SetDeadline(time.Now().Add(10 * time.Second))
	r := bufio.NewReader(conn)
	if _, err := r.ReadString('\n'); err != nil { // greeting
		return nil, err
	}
	var last json.RawMessage
	for _, c := range append([]string{`{"execute":"qmp_capabilities"}`}, cmds...) {
		fmt.Fprintln(conn, c)
		for {
			line, err := r.ReadString('\n')
			if err != nil {
				return nil, fmt.Errorf("QMP %s: %w", c, err)
			}
			var reply struct {
				Event  string          `json:"event"`
				Return json.RawMessage `json:"return"`
			}
			if json.Unmarshal([]byte(line), &reply) == nil && reply.Event != "" {
				continue
			}
			if reply.Return == nil {
				return nil, fmt.Errorf("QMP %s: %s", c, strings.TrimSpace(line))
			}
			last = reply.Return
			break
		}
	}
	return last, nil
}

// BootDisk is the QEMU drive id of the instance's system disk.
const BootDisk = "disk0"

// BlockStats are a drive's I/O counters since QEMU started, as the guest
// issued them (QMP query-blockstats, BlockDeviceStats): on ECS a system
// disk created from a custom image fetches each block from the image's
// snapshot on first read, so the bytes read until Ready are boot time
// there.
type BlockStats struct {
	ReadBytes  int64 `json:"rd_bytes"`
	ReadOps    int64 `json:"rd_operations"`
	WriteBytes int64 `json:"wr_bytes"`
	WriteOps   int64 `json:"wr_operations"`
}

// BlockStats returns the counters of the drive with QEMU id device (e.g.
// BootDisk).
func (vm *VM) BlockStats(device string) (BlockStats, error) {
	raw, err := vm.qmpQuery(`{"execute":"query-blockstats"}`)
	if err != nil {
		return BlockStats{}, err
	}
	return parseBlockStats(raw, device)
}

func parseBlockStats(raw json.RawMessage, device string) (BlockStats, error) {
	var all []struct {
		Device string     `json:"device"`
		Stats  BlockStats `json:"stats"`
	}
	if err := json.Unmarshal(raw, &all); err != nil {
		return BlockStats{}, fmt.Errorf("QMP query-blockstats: %w", err)
	}
	var names []string
	for _, d := range all {
		if d.Device == device {
			return d.Stats, nil
		}
		names = append(names, d.Device)
	}
	return BlockStats{}, fmt.Errorf("QMP query-blockstats: no drive %q among %q", device, names)
}

// SetLink sets the link of the VM's NIC up or down, as a cable pulled (or
// an ENI's link lost): the guest's driver sees its carrier go (virtio-net's
// link status) and QEMU drops the frames meanwhile.
func (vm *VM) SetLink(up bool) error {
	return vm.qmpCommand(fmt.Sprintf(`{"execute":"set_link","arguments":{"name":"n0","up":%t}}`, up))
}

func (c *Config) qmpPath() string { return filepath.Join(c.StateDir, "qmp.sock") }

// Shutdown asks the guest to power off (ACPI power button over QMP) and
// waits for QEMU to exit; systemd then stops cleanly and /var is
// consistent. After the timeout it stops the VM hard.
func (vm *VM) Shutdown(timeout time.Duration) error {
	// A press of the ACPI power button early in boot, before the guest's
	// button driver and systemd-logind are up, is lost (seen: a refused
	// node, 55 s into its boot, never powered off): press it again every
	// powerButtonEvery, as a person would. A guest already shutting down
	// ignores the repeats.
	deadline := time.After(timeout)
	for {
		_ = vm.qmpCommand(`{"execute":"system_powerdown"}`)
		select {
		case <-vm.done:
			return nil
		case <-deadline:
			vm.Stop()
			return fmt.Errorf("the guest did not power off within %s (the power button pressed every %s); stopped it", timeout, powerButtonEvery)
		case <-time.After(powerButtonEvery):
		}
	}
}

// WaitExit waits up to timeout for QEMU to exit by itself (the guest
// powered off); after that it stops the VM hard and says so.
func (vm *VM) WaitExit(timeout time.Duration) error {
	select {
	case <-vm.done:
		return nil
	case <-time.After(timeout):
		vm.Stop()
		return fmt.Errorf("the guest did not power off within %s; stopped it", timeout)
	}
}

// powerButtonEvery is how often Shutdown presses the power button.
const powerButtonEvery = 20 * time.Second

// Stop ends the VM: SIGTERM (QEMU powers off), then SIGKILL after 10 s.
func (vm *VM) Stop() error {
	if vm.cmd.Process == nil {
		return nil
	}
	_ = syscall.Kill(-vm.cmd.Process.Pid, syscall.SIGTERM)
	select {
	case <-vm.done:
	case <-time.After(10 * time.Second):
		_ = syscall.Kill(-vm.cmd.Process.Pid, syscall.SIGKILL)
		<-vm.done
	}
	return nil
}

// Wait waits for QEMU to exit.
func (vm *VM) Wait() error {
	<-vm.done
	return vm.exitErr
}
