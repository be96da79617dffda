package network

import (
	"fmt"
	"os"
	"path/filepath"
	"strings"

	"golang.org/x/sys/unix"
)

// kernelHostnameMax is the kernel's limit on the UTS nodename (__NEW_UTS_LEN);
// a longer, valid DNS name cannot be set.
const kernelHostnameMax = 64

// NormalizeHostname lower-cases name and checks it is an RFC 1123 host name:
// dot-separated labels of 1–63 letters, digits and hyphens, not starting or
// ending with a hyphen, 253 characters at most, and short enough for the
// kernel (64). ECS hostnames such as "iZbp1abcdZ" have upper-case letters;
// Kubernetes node names must be lower-case, so the node is named in lower case.
func NormalizeHostname(name string) (string, error) {
	n := strings.ToLower(strings.TrimSuffix(name, "."))
	fail := func(why string) (string, error) {
		return "", fmt.Errorf("hostname %q is not a valid RFC 1123 host name: %s", name, why)
	}
	switch {
	case n == "":
		return fail("it is empty")
	case len(n) > 253:
		return fail(fmt.Sprintf("it is %d characters long, the limit is 253", len(n)))
	case len(n) > kernelHostnameMax:
		return fail(fmt.Sprintf("it is %d characters long and the kernel allows %d: use a shorter name", len(n), kernelHostnameMax))
	}
	for _, label := range strings.Split(n, ".") {
		switch {
		case label == "":
			return fail("it has an empty label")
		case len(label) > 63:
			return fail(fmt.Sprintf("label %q is longer than 63 characters", label))
		case label[0] == '-' || label[len(label)-1] == '-':
			return fail(fmt.Sprintf("label %q starts or ends with a hyphen", label))
		}
		for _, c := range label {
			if !(c >= 'a' && c <= 'z' || c >= '0' && c <= '9' || c == '-') {
				return fail(fmt.Sprintf("label %q contains %q; only letters, digits and hyphens are allowed", label, c))
			}
		}
	}
	return n, nil
}

// SetHostname normalizes name (see NormalizeHostname), writes it to
// <root>/etc/hostname (the static hostname hostnamectl and systemd-hostnamed
// report) and sets it in the kernel for the calling thread's UTS namespace
// (what kubelet and everything else read). It returns the
// name set, which is the name the node registers with.
func SetHostname(root, name string, logf Logf) (string, error) {
	n, err := NormalizeHostname(name)
	if err != nil {
		return "", fmt.Errorf("network: setting the hostname: %w", err)
	}
	path := filepath.Join(root, "etc", "hostname")
	if err := writeFileAtomic(path, []byte(n+"\n"), 0o644); err != nil {
		return "", fmt.Errorf("network: setting the hostname %s: writing %s: %w", n, path, err)
	}
	if err := unix.Sethostname([]byte(n)); err != nil {
		return "", fmt.Errorf("network: setting the hostname %s in the kernel: %w", n, err)
	}
	if n != name {
		logf.printf("network: hostname %s (from %q)", n, name)
	} else {
		logf.printf("network: hostname %s", n)
	}
	return n, nil
}

// writeFileAtomic replaces path through a temporary file in the same
// directory, so a reader never sees a half-written file.
func writeFileAtomic(path string, data []byte, mode os.FileMode) error {
	dir := filepath.Dir(path)
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return err
	}
	f, err := os.CreateTemp(dir, ".drover-*")
	if err != nil {
		return err
	}
	defer os.Remove(f.Name()) // a no-op after the rename
	if _, err := f.Write(data); err != nil {
		f.Close()
		return err
	}
	if err := f.Chmod(mode); err != nil {
		f.Close()
		return err
	}
	if err := f.Close(); err != nil {
		return err
	}
	return os.Rename(f.Name(), path)
}
