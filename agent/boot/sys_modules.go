package boot

import (
	"bytes"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strings"

	"github.com/ulikunitz/xz"
	"golang.org/x/sys/unix"
)

// loadModules loads the config's modules in order. The builder lists them
// with their dependencies first, so there is no modprobe here.
func (m *Machine) loadModules() error {
	c := m.Config
	if len(c.Modules) == 0 {
		return nil
	}
	var uts unix.Utsname
	if err := unix.Uname(&uts); err == nil {
		if running := unix.ByteSliceToString(uts.Release[:]); running != c.Kernel {
			return fmt.Errorf("the initrd's modules are for kernel %s but kernel %s is running: the loader entry and initrd come from different builds; rebuild the image",
				c.Kernel, running)
		}
	}
	dir := filepath.Join(m.Paths.Modules, c.Kernel)
	for _, rel := range c.Modules {
		how, err := loadModule(filepath.Join(dir, rel))
		if err != nil {
			return fmt.Errorf("loading module %s: %w", rel, err)
		}
		m.Log.Debugf("module %s: %s", rel, how)
	}
	return nil
}

// loadModule loads one module file and says how it went. A module the
// kernel already has (built in or loaded) is fine.
func loadModule(path string) (string, error) {
	f, err := os.Open(path)
	if err != nil {
		return "", fmt.Errorf("opening %s: %w (the initrd lacks a module its config lists: rebuild the image)", path, err)
	}
	defer f.Close()
	compressed := strings.HasSuffix(path, ".xz")
	flags := 0
	if compressed {
		flags = unix.MODULE_INIT_COMPRESSED_FILE
	}
	err = unix.FinitModule(int(f.Fd()), "", flags)
	switch {
	case err == nil:
		return "loaded", nil
	case errors.Is(err, unix.EEXIST):
		return "already loaded", nil
	case errors.Is(err, unix.ENODEV):
		// A CPU-feature module (the SHA-256 accelerators) on a CPU
		// without the feature: the kernel keeps its generic code.
		return "skipped: no device or CPU feature for it (ENODEV)", nil
	case errors.Is(err, unix.ENOSYS) || compressed && (errors.Is(err, unix.EINVAL) || errors.Is(err, unix.EOPNOTSUPP)):
		// The kernel cannot read this file itself (no in-kernel
		// decompression, or no finit_module): hand it the bytes.
		image, rerr := moduleImage(f, compressed)
		if rerr != nil {
			return "", rerr
		}
		if ierr := unix.InitModule(image, ""); ierr != nil && !errors.Is(ierr, unix.EEXIST) {
			return "", fmt.Errorf("init_module: %w%s", ierr, moduleHint(ierr))
		}
		return fmt.Sprintf("loaded with init_module (finit_module: %v)", err), nil
	}
	return "", fmt.Errorf("finit_module: %w%s", err, moduleHint(err))
}

// moduleImage reads a module file, decompressing .ko.xz.
func moduleImage(f *os.File, compressed bool) ([]byte, error) {
	if _, err := f.Seek(0, io.SeekStart); err != nil {
		return nil, fmt.Errorf("rewinding %s: %w", f.Name(), err)
	}
	raw, err := io.ReadAll(f)
	if err != nil {
		return nil, fmt.Errorf("reading %s: %w", f.Name(), err)
	}
	if !compressed {
		return raw, nil
	}
	r, err := xz.NewReader(bytes.NewReader(raw))
	if err != nil {
		return nil, fmt.Errorf("decompressing %s: %w", f.Name(), err)
	}
	out, err := io.ReadAll(r)
	if err != nil {
		return nil, fmt.Errorf("decompressing %s: %w", f.Name(), err)
	}
	return out, nil
}

// moduleHint turns the kernel's terse errors into what to do.
func moduleHint(err error) string {
	switch {
	case errors.Is(err, unix.ENOEXEC):
		return " (the module was not built for the running kernel: rebuild the image)"
	case errors.Is(err, unix.ENOENT):
		return " (it needs a symbol from a module that is missing or listed after it: fix the initrd's module list)"
	case errors.Is(err, unix.EKEYREJECTED), errors.Is(err, unix.EPERM):
		return " (the kernel refused the module's signature or module loading is locked down)"
	}
	return ""
}
