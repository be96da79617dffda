package sources

import (
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"

	"github.com/ProtonMail/go-crypto/openpgp"

	"github.com/drover-os/drover/image/debian"
	"github.com/drover-os/drover/image/lock"
	"github.com/drover-os/drover/image/recipe"
	"github.com/drover-os/drover/recipes/keys"
)

// TrustRoot is the set of keys a suite's InRelease must be signed by.
type TrustRoot struct {
	Keys openpgp.EntityList
	// Source is what the lock records: "repo:recipes/keys/<file>" for the
	// keys committed in drover's repository, "recipe:<path>" for a keyring
	// the recipe names, "override:sha256:<hex>" for --keyring (a private
	// mirror; the path is the build host's, so the lock records the content).
	Source string
	// Name is the keyring as messages name it.
	Name string
	// SHA256 is the digest of the keyring's bytes as read; Path is the file
	// read (the recipe's debian.keyring joined to its directory, or
	// --keyring), empty for the keys compiled into drover.
	SHA256, Path string
}

// TrustRoot picks the keys for suite: --keyring, else the recipe's keyring,
// else the keys committed in recipes/keys. The build host's keyring is never
// consulted: a lock must mean the same on every machine.
func (o *Options) TrustRoot(r *recipe.Recipe, suite string) (*TrustRoot, error) {
	switch {
	case o.Keyring != "":
		data, err := os.ReadFile(o.Keyring)
		if err != nil {
			return nil, fmt.Errorf("reading keyring %s (--keyring): %w", o.Keyring, err)
		}
		ks, err := debian.ParseKeyring(data)
		if err != nil {
			return nil, fmt.Errorf("reading keyring %s (--keyring): %w", o.Keyring, err)
		}
		sum := sha256.Sum256(data)
		return &TrustRoot{Keys: ks, Source: "override:sha256:" + hex.EncodeToString(sum[:]), Name: o.Keyring + " (--keyring)",
			SHA256: hex.EncodeToString(sum[:]), Path: o.Keyring}, nil
	case r.Debian.Keyring != "":
		path := r.Debian.Keyring
		if !filepath.IsAbs(path) {
			path = filepath.Join(r.Dir, path)
		}
		data, err := os.ReadFile(path)
		if err != nil {
			return nil, fmt.Errorf("%s: debian.keyring: reading keyring %s: %w (check the keyring path)", r.Path, path, err)
		}
		ks, err := debian.ParseKeyring(data)
		if err != nil {
			return nil, fmt.Errorf("%s: debian.keyring: reading keyring %s: %w", r.Path, path, err)
		}
		sum := sha256.Sum256(data)
		return &TrustRoot{Keys: ks, Source: "recipe:" + r.Debian.Keyring, Name: path + " (the recipe's debian.keyring)", SHA256: hex.EncodeToString(sum[:]), Path: path}, nil
	}
	data, name, err := keys.Debian(suite)
	if err != nil {
		return nil, err
	}
	ks, err := debian.ParseKeyring(data)
	if err != nil {
		return nil, fmt.Errorf("trust root %s: %w", name, err)
	}
	sum := sha256.Sum256(data)
	return &TrustRoot{Keys: ks, Source: "repo:" + name, Name: name, SHA256: hex.EncodeToString(sum[:])}, nil
}

// Has reports whether fingerprint (hex) is the primary key of one of the keys.
func (t *TrustRoot) Has(fingerprint string) bool {
	return slices.ContainsFunc(t.Keys, func(e *openpgp.Entity) bool {
		return strings.EqualFold(hex.EncodeToString(e.PrimaryKey.Fingerprint), fingerprint)
	})
}

// CheckSigners refuses a lock whose suites were not signed by a key of the
// trust root this run uses: a lock made against a host keyring, another
// --keyring, or before drover recorded signers is not explained by the
// repository and must be made again.
func CheckSigners(r *recipe.Recipe, l *lock.Lock, o Options) error {
	_, err := checkSigners(r, l, o)
	return err
}

// checkSigners is CheckSigners returning the trust root of each suite, in
// lock order, for the build to record what it read.
func checkSigners(r *recipe.Recipe, l *lock.Lock, o Options) ([]*TrustRoot, error) {
	var roots []*TrustRoot
	for _, s := range l.Suites {
		if s.Signer == "" {
			return nil, fmt.Errorf("lock %s records no signer for suite %s (it predates drover's trust root in %s): run `drover lock %s`", r.LockPath(), s.Name, keys.Dir, r.Path)
		}
		tr, err := o.TrustRoot(r, s.Name)
		if err != nil {
			return nil, err
		}
		if tr.Source != s.Trust {
			return nil, fmt.Errorf("lock %s: suite %s was verified against %s, this run trusts %s: pass the --keyring the lock was made with, or run `drover lock %s`", r.LockPath(), s.Name, s.Trust, tr.Source, r.Path)
		}
		if !tr.Has(s.Signer) {
			return nil, fmt.Errorf("lock %s: suite %s was signed by key %s, which is not in %s: run `drover lock %s` (or restore the key if its removal was a mistake)", r.LockPath(), s.Name, s.Signer, tr.Name, r.Path)
		}
		roots = append(roots, tr)
	}
	return roots, nil
}
