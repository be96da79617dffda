package agent

import (
	"bytes"
	"crypto/x509"
	"encoding/json"
	"encoding/pem"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"time"

	"github.com/drover-os/drover/agent/ignition"
	"github.com/drover-os/drover/agent/nodeconfig"
	"github.com/drover-os/drover/internal/atomicfile"
)

// The bootstrap token is a credential for joining the cluster as any node:
// once the kubelet holds its own client certificate the node needs it no
// more, and nothing the node keeps may hold it (a stopped instance's disk
// is readable by whoever can snapshot it; /etc by any process on the node).
// redactSecrets replaces its secret by nodeconfig.RedactedSecret in the
// stored config, the content-addressed remote contents and every managed
// file; the digest of the user-data as given stays in StoredDigest, so the
// changed-user-data check still compares against what the instance was
// launched with.

// clientCertErr says why the kubelet's client certificate cannot be used
// (nil: it can): missing, unparsable, without a key, or outside its
// validity period.
func clientCertErr(path string, now time.Time) error {
	data, err := os.ReadFile(path)
	if err != nil {
		return err
	}
	var cert *x509.Certificate
	key := false
	for rest := data; ; {
		var b *pem.Block
		b, rest = pem.Decode(rest)
		if b == nil {
			break
		}
		switch {
		case b.Type == "CERTIFICATE" && cert == nil:
			if cert, err = x509.ParseCertificate(b.Bytes); err != nil {
				return fmt.Errorf("%s: %w", path, err)
			}
		case strings.HasSuffix(b.Type, "PRIVATE KEY"):
			key = true
		}
	}
	switch {
	case cert == nil:
		return fmt.Errorf("%s holds no certificate", path)
	case !key:
		return fmt.Errorf("%s holds no private key", path)
	case now.Before(cert.NotBefore):
		return fmt.Errorf("%s is valid only from %s", path, cert.NotBefore.UTC().Format(time.RFC3339))
	case now.After(cert.NotAfter):
		return fmt.Errorf("%s expired at %s", path, cert.NotAfter.UTC().Format(time.RFC3339))
	}
	return nil
}

func (a *Agent) clientCertErr() error { return clientCertErr(a.path(KubeletCert), time.Now()) }

// redactSecrets removes the bootstrap token's secret from everything the
// node keeps, once the kubelet's certificate is valid. Each file is
// replaced atomically, in an order where an interruption leaves a state a
// later boot redacts again: the stored config holds the secret until every
// other copy but the managed files is gone, and those are rebuilt from it.
func (a *Agent) redactSecrets() (string, error) {
	secret := nodeconfig.TokenSecret(a.node.Cluster.BootstrapToken)
	if secret == "" {
		return "no bootstrap token on the node", nil
	}
	stored, err := os.ReadFile(a.path(StoredConfig))
	if err != nil {
		return "", fmt.Errorf("redacting the bootstrap token: reading the stored config: %w", err)
	}
	// The changed-user-data check needs the digest of the user-data as
	// given (apply wrote it); make sure before the config stops matching it.
	if err := a.writeLaunchedWith(); err != nil {
		return "", fmt.Errorf("redacting the bootstrap token: %w", err)
	}
	cache := ignition.DirCache(a.path(ContentsDir))
	red, err := ignition.Redact(stored, secret, nodeconfig.RedactedSecret, cache)
	if err != nil {
		return "", fmt.Errorf("redacting the bootstrap token in %s: %w", StoredConfig, err)
	}
	var done []string
	for _, h := range red.Dropped {
		if err := removeScrubbed(filepath.Join(string(cache), h)); err != nil {
			return "", fmt.Errorf("redacting the bootstrap token: deleting the stored remote contents: %w", err)
		}
		done = append(done, filepath.Join(ContentsDir, h)+" (deleted, inlined redacted)")
	}
	if red.Changed {
		if err := replaceScrubbed(a.path(StoredConfig), red.Config, 0o600); err != nil {
			return "", fmt.Errorf("redacting the bootstrap token: %w", err)
		}
		done = append(done, StoredConfig)
	}
	// The applied files (the node file in /etc above all) hold what the
	// config gave them; the guard's record follows their new contents.
	changedManaged := false
	for i, m := range a.managed {
		if m.Kind != "file" {
			continue
		}
		ok, sum, err := redactFile(a.path(m.Path), secret)
		if err != nil {
			return "", fmt.Errorf("redacting the bootstrap token in %s: %w", m.Path, err)
		}
		if ok {
			if m.SHA256 != "" {
				a.managed[i].SHA256 = sum
			}
			a.watch.add(a.env.Root, a.managed[i], "user-data")
			changedManaged = true
			done = append(done, m.Path)
		}
	}
	if changedManaged {
		mj, _ := json.MarshalIndent(a.managed, "", "  ")
		if err := atomicfile.Write(a.path(ManagedFile), mj, 0o644); err != nil {
			return "", err
		}
	}
	a.node.Cluster.BootstrapToken = redactedToken(a.node.Cluster.BootstrapToken)
	if len(done) == 0 {
		return "bootstrap token already redacted", nil
	}
	return "bootstrap token redacted in " + strings.Join(done, ", "), nil
}

func redactedToken(token string) string {
	id, _, _ := strings.Cut(token, ".")
	return id + "." + nodeconfig.RedactedSecret
}

// redactFile replaces secret in the file at p, keeping its mode and owner;
// it reports whether it did and the new contents' digest.
func redactFile(p, secret string) (bool, string, error) {
	fi, err := os.Lstat(p)
	if err != nil || !fi.Mode().IsRegular() {
		return false, "", nil // the guard reports what is missing
	}
	data, err := os.ReadFile(p)
	if err != nil {
		return false, "", err
	}
	if !bytes.Contains(data, []byte(secret)) {
		return false, "", nil
	}
	data = bytes.ReplaceAll(data, []byte(secret), []byte(nodeconfig.RedactedSecret))
	if err := replaceScrubbed(p, data, fi.Mode().Perm()); err != nil {
		return false, "", err
	}
	if st, ok := fi.Sys().(*syscall.Stat_t); ok && (st.Uid != 0 || st.Gid != 0) {
		if err := os.Lchown(p, int(st.Uid), int(st.Gid)); err != nil {
			return false, "", err
		}
	}
	return true, digest(data), nil
}

// replaceScrubbed replaces the file at p atomically (atomicfile), then
// overwrites the replaced file's data with zeros before letting go of it:
// ext4 frees a deleted file's blocks as they are, and a disk image read
// below the filesystem would still show the secret in them. Until the new
// file is in place the old one is untouched, so an interruption leaves
// either state; a file with other hard links is not zeroed (they still
// name it).
func replaceScrubbed(p string, data []byte, perm os.FileMode) error {
	old, err := openSoleLink(p)
	if err != nil {
		return err
	}
	if err := atomicfile.Write(p, data, perm); err != nil {
		if old != nil {
			old.Close()
		}
		return err
	}
	return scrub(old, p)
}

// removeScrubbed zeroes the file at p, then removes it.
func removeScrubbed(p string) error {
	old, err := openSoleLink(p)
	if err != nil || old == nil {
		return err
	}
	if err := os.Remove(p); err != nil {
		old.Close()
		return err
	}
	return scrub(old, p)
}

// openSoleLink opens p for writing if it is a regular file with no other
// hard link; nil if it is absent or has other links.
func openSoleLink(p string) (*os.File, error) {
	f, err := os.OpenFile(p, os.O_WRONLY|syscall.O_NOFOLLOW, 0)
	if errors.Is(err, os.ErrNotExist) {
		return nil, nil
	}
	if err != nil {
		return nil, fmt.Errorf("opening %s to scrub it: %w", p, err)
	}
	fi, err := f.Stat()
	st, ok := fi.Sys().(*syscall.Stat_t)
	if err != nil || !fi.Mode().IsRegular() || !ok || st.Nlink != 1 {
		f.Close()
		return nil, err
	}
	return f, nil
}

// scrub overwrites f (already unlinked or replaced) with zeros, syncs and
// closes it.
func scrub(f *os.File, p string) error {
	if f == nil {
		return nil
	}
	defer f.Close()
	fi, err := f.Stat()
	if err == nil {
		_, err = f.WriteAt(make([]byte, fi.Size()), 0)
	}
	if err == nil {
		err = f.Sync()
	}
	if err != nil {
		return fmt.Errorf("overwriting the replaced %s: %w", p, err)
	}
	return nil
}
