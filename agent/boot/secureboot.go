package boot

import (
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"

	"github.com/drover-os/drover/internal/atomicfile"
	"golang.org/x/sys/unix"
)

// SecureBootVar is the UEFI global variable that says whether the firmware
// enforced Secure Boot for this boot (UEFI specification §3.3, EFI global
// variable GUID), as efivarfs names it.
const SecureBootVar = "SecureBoot-8be4df61-93ca-11d2-aa0d-00e098032b8c"

// SecureBootPath is where drover-init leaves what it found, for the agent
// (under /run, which moves into the real root).
const SecureBootPath = "/run/drover/secure-boot.json"

// The Secure Boot states drover-init records.
const (
	SecureBootOn  = "on"  // the firmware's SecureBoot variable reads 1
	SecureBootOff = "off" // it reads 0, the firmware has no such variable, or no UEFI booted the kernel
	// SecureBootUnknown: the state could not be read (efivarfs would not
	// mount, the variable would not read or parse, the kernel hides UEFI
	// from a signed UKI). It is not "off": `noefi` on the command line
	// is enough to get here.
	SecureBootUnknown = "unknown"
)

// SecureBoot is drover-init's finding.
type SecureBoot struct {
	Enabled bool   `json:"enabled"` // State is SecureBootOn
	State   string `json:"state"`   // SecureBootOn, SecureBootOff or SecureBootUnknown
	Source  string `json:"source"`  // what it was read from, e.g. "EFI variable SecureBoot = 1"
	// SignedUKI is the initrd's own word (Config.SignedUKI) that its UKI
	// was signed for Secure Boot.
	SignedUKI bool `json:"signedUKI"`
}

// ParseSecureBootVar reads an efivarfs file: 4 bytes of attributes, then
// the value, one byte, 1 when Secure Boot is enforced.
func ParseSecureBootVar(b []byte) (bool, error) {
	if len(b) != 5 {
		return false, fmt.Errorf("efivarfs %s holds %d bytes, want 4 bytes of attributes and 1 of value", SecureBootVar, len(b))
	}
	switch b[4] {
	case 0:
		return false, nil
	case 1:
		return true, nil
	}
	return false, fmt.Errorf("efivarfs %s has value %d, want 0 or 1", SecureBootVar, b[4])
}

// ReadSecureBoot returns what drover-init left under root, or nil when it
// left nothing (an older initrd, or drover-init not run).
func ReadSecureBoot(root string) (*SecureBoot, error) {
	b, err := os.ReadFile(filepath.Join(root, SecureBootPath))
	if errors.Is(err, fs.ErrNotExist) {
		return nil, nil
	}
	if err != nil {
		return nil, err
	}
	var s SecureBoot
	if err := json.Unmarshal(b, &s); err != nil {
		return nil, fmt.Errorf("%s: %w", SecureBootPath, err)
	}
	if s.State == "" { // written before the state had three values
		s.State = map[bool]string{true: SecureBootOn, false: SecureBootOff}[s.Enabled]
	}
	return &s, nil
}

func describeSecureBoot(*Config) string {
	return "read the EFI variable " + SecureBootVar + " (efivarfs) and record in " + SecureBootPath +
		" whether Secure Boot was on, off or could not be read, and whether the UKI is signed"
}

// secureBoot finds out whether the firmware enforced Secure Boot. It never
// fails the boot: what it found, unreadable included, is recorded, and
// the signed-cmdline step decides.
func (m *Machine) secureBoot() error {
	s := m.probeSecureBoot()
	s.SignedUKI = m.Config != nil && m.Config.SignedUKI
	m.secureBootState = s.State
	signed := ""
	if s.SignedUKI {
		signed = "; the UKI is signed"
	}
	m.Log.Printf("secure-boot: %s (%s%s)", s.State, s.Source, signed)
	data, _ := json.Marshal(s)
	path := filepath.Join(m.Paths.Run, SecureBootPath[len("/run"):])
	if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil {
		return fmt.Errorf("creating %s: %w", filepath.Dir(path), err)
	}
	return atomicfile.Write(path, append(data, '\n'), 0o644)
}

// mountEFIVars mounts efivarfs read-only at dir and returns how to unmount
// it again: systemd mounts efivarfs itself, read-write, later.
func mountEFIVars(dir string) (func(), error) {
	err := unix.Mount("efivarfs", dir, "efivarfs", unix.MS_NOSUID|unix.MS_NODEV|unix.MS_NOEXEC|unix.MS_RDONLY, "")
	if errors.Is(err, unix.EBUSY) {
		return func() {}, nil // already mounted
	}
	switch {
	case errors.Is(err, unix.ENODEV):
		return nil, fmt.Errorf("mounting efivarfs at %s: %v (is the efivarfs module in the initrd?)", dir, err)
	case errors.Is(err, unix.EOPNOTSUPP):
		return nil, fmt.Errorf("mounting efivarfs at %s: %v (the kernel does not use UEFI runtime services: noefi or efi=noruntime?)", dir, err)
	case err != nil:
		return nil, fmt.Errorf("mounting efivarfs at %s: %v", dir, err)
	}
	return func() { unix.Unmount(dir, 0) }, nil
}

func (m *Machine) probeSecureBoot() SecureBoot {
	unknown := func(why string) SecureBoot { return SecureBoot{State: SecureBootUnknown, Source: why} }
	efi := filepath.Join(m.Paths.Sys, "firmware", "efi")
	if _, err := os.Stat(efi); err != nil {
		if m.Config != nil && m.Config.SignedUKI {
			// A UKI is a UEFI program: the firmware ran it, so the kernel
			// was told to ignore UEFI.
			return unknown("the UKI ran under UEFI, yet the kernel shows no " + efi)
		}
		return SecureBoot{State: SecureBootOff, Source: "not booted by UEFI: no " + efi}
	}
	vars := filepath.Join(efi, "efivars")
	mount := m.mountEFIVars
	if mount == nil {
		mount = mountEFIVars
	}
	unmount, err := mount(vars)
	if err != nil {
		return unknown(err.Error())
	}
	defer unmount()
	b, err := os.ReadFile(filepath.Join(vars, SecureBootVar))
	if errors.Is(err, fs.ErrNotExist) {
		// UEFI firmware always has global variables (BootCurrent,
		// OsIndicationsSupported …): an empty efivarfs is one that
		// cannot reach them, not firmware without Secure Boot.
		ents, derr := os.ReadDir(vars)
		if derr != nil {
			return unknown(fmt.Sprintf("listing efivarfs: %v", derr))
		}
		if len(ents) == 0 {
			return unknown("efivarfs at " + vars + " lists no variables at all")
		}
		return SecureBoot{State: SecureBootOff, Source: "the firmware sets no EFI variable SecureBoot"}
	}
	if err != nil {
		return unknown(fmt.Sprintf("reading EFI variable SecureBoot: %v", err))
	}
	on, err := ParseSecureBootVar(b)
	if err != nil {
		return unknown(err.Error())
	}
	s := SecureBoot{State: SecureBootOff, Source: fmt.Sprintf("EFI variable SecureBoot = %d", b[4])}
	if on {
		s.State, s.Enabled = SecureBootOn, true
	}
	return s
}
