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

// SecureBoot is drover-init's finding.
type SecureBoot struct {
	Enabled bool   `json:"enabled"`
	Source  string `json:"source"` // what it was read from, e.g. "EFI variable SecureBoot = 1"
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
	return &s, nil
}

func describeSecureBoot(*Config) string {
	return "read the EFI variable " + SecureBootVar + " (efivarfs) and record whether Secure Boot was on in " + SecureBootPath
}

// secureBoot finds out whether the firmware enforced Secure Boot. It never
// fails the boot: a machine without UEFI, or firmware without the
// variable, did not boot securely, and that is what gets recorded.
func (m *Machine) secureBoot() error {
	s := m.probeSecureBoot()
	m.secureBootOn = s.Enabled
	state := "off"
	if s.Enabled {
		state = "on"
	}
	m.Log.Printf("secure-boot: %s (%s)", state, s.Source)
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
	if err != nil {
		return nil, fmt.Errorf("mounting efivarfs at %s: %v (is the efivarfs module in the initrd?)", dir, err)
	}
	return func() { unix.Unmount(dir, 0) }, nil
}

func (m *Machine) probeSecureBoot() SecureBoot {
	efi := filepath.Join(m.Paths.Sys, "firmware", "efi")
	if _, err := os.Stat(efi); err != nil {
		return SecureBoot{Source: "not booted by UEFI: no " + efi}
	}
	vars := filepath.Join(efi, "efivars")
	mount := m.mountEFIVars
	if mount == nil {
		mount = mountEFIVars
	}
	unmount, err := mount(vars)
	if err != nil {
		return SecureBoot{Source: err.Error()}
	}
	defer unmount()
	b, err := os.ReadFile(filepath.Join(vars, SecureBootVar))
	if errors.Is(err, fs.ErrNotExist) {
		return SecureBoot{Source: "the firmware sets no EFI variable SecureBoot"}
	}
	if err != nil {
		return SecureBoot{Source: fmt.Sprintf("reading EFI variable SecureBoot: %v", err)}
	}
	on, err := ParseSecureBootVar(b)
	if err != nil {
		return SecureBoot{Source: err.Error()}
	}
	return SecureBoot{Enabled: on, Source: fmt.Sprintf("EFI variable SecureBoot = %d", b[4])}
}
