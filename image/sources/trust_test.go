package sources

import (
	"context"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/drover-os/drover/image/lock"
)

// The fake archive is signed by a key generated for the test: without
// --keyring the lock trusts only the keys committed in recipes/keys, so it
// must refuse the archive and name the key, before fetching anything else.
func TestLockRefusesKeyOutsideTheRepository(t *testing.T) {
	e := newEnv(t)
	e.opts.Keyring = ""
	_, err := e.lock(e.recipe("name: t\npackages: [systemd]\n"), nil)
	if err == nil {
		t.Fatal("lock accepted an InRelease signed by a key that is not in recipes/keys")
	}
	for _, want := range []string{"InRelease for trixie is signed by key " + e.archive.Fingerprint(), "which is not in keyring recipes/keys/debian-archive-trixie.asc"} {
		if !strings.Contains(err.Error(), want) {
			t.Errorf("error %q lacks %q", err, want)
		}
	}
	if reqs := e.archive.Requests(); len(reqs) != 1 || !strings.HasSuffix(reqs[0], "/InRelease") {
		t.Errorf("fetched more than the InRelease: %v", reqs)
	}
}

func TestLockRecordsSignerAndTrust(t *testing.T) {
	e := newEnv(t)
	res, err := e.lock(e.recipe("name: t\npackages: [systemd]\n"), nil)
	if err != nil {
		t.Fatal(err)
	}
	s := res.Lock.Suites[0]
	if s.Signer != e.archive.Fingerprint() || !strings.HasPrefix(s.Trust, "override:sha256:") {
		t.Fatalf("suite = %+v, want signer %s trusted by override", s, e.archive.Fingerprint())
	}
	// The same lock run with the recipe's keyring instead of --keyring
	// trusts other keys: the lock is not "unchanged".
	data, _ := os.ReadFile(e.archive.KeyringPath)
	os.WriteFile(filepath.Join(e.dir, "archive.gpg"), data, 0o644)
	e.opts.Keyring = ""
	r := e.recipe("name: t\npackages: [systemd]\ndebian:\n  suite: trixie\n  keyring: archive.gpg\n")
	res2, err := e.lock(r, res.Lock)
	if err != nil {
		t.Fatal(err)
	}
	if res2.Unchanged || res2.Lock.Suites[0].Trust != "recipe:archive.gpg" {
		t.Errorf("re-lock with another trust root: unchanged %v, suite %+v", res2.Unchanged, res2.Lock.Suites[0])
	}
}

func TestFetchChecksTheLockedSigner(t *testing.T) {
	e := newEnv(t)
	r := e.recipe("name: t\npackages: [systemd]\n")
	res, err := e.lock(r, nil)
	if err != nil {
		t.Fatal(err)
	}
	fetch := func(l *lock.Lock, o Options) error {
		_, err := Fetch(context.Background(), r, l, o)
		return err
	}
	if err := fetch(res.Lock, e.opts); err != nil {
		t.Fatal(err)
	}
	with := func(f func(*lock.Suite)) *lock.Lock {
		l := *res.Lock
		l.Suites = append([]lock.Suite(nil), l.Suites...)
		f(&l.Suites[0])
		return &l
	}
	noKeyring := e.opts
	noKeyring.Keyring = ""
	other := filepath.Join(e.dir, "other.gpg")
	os.WriteFile(other, []byte("x"), 0o644)
	for _, tc := range []struct {
		name string
		l    *lock.Lock
		o    Options
		want string
	}{
		{"signer not in the keyring", with(func(s *lock.Suite) { s.Signer = "0123456789ABCDEF0123456789ABCDEF01234567" }), e.opts,
			"suite trixie was signed by key 0123456789ABCDEF0123456789ABCDEF01234567, which is not in " + e.archive.KeyringPath + " (--keyring)"},
		{"no signer recorded", with(func(s *lock.Suite) { s.Signer, s.Trust = "", "" }), e.opts,
			"records no signer for suite trixie"},
		{"locked with --keyring, fetched with the repository's keys", res.Lock, noKeyring,
			"suite trixie was verified against " + res.Lock.Suites[0].Trust + ", this run trusts repo:recipes/keys/debian-archive-trixie.asc"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			err := fetch(tc.l, tc.o)
			if err == nil || !strings.Contains(err.Error(), tc.want) {
				t.Fatalf("error %v\nwant it to contain %q", err, tc.want)
			}
		})
	}
	before := len(e.archive.Requests())
	fetch(with(func(s *lock.Suite) { s.Signer = "00" }), e.opts)
	if after := len(e.archive.Requests()); after != before {
		t.Errorf("a refused lock still fetched %d files", after-before)
	}
}

func TestLockRefusesReleaseDates(t *testing.T) {
	e := newEnv(t)
	r := e.recipe("name: t\npackages: [systemd]\n")
	e.archive.SetDates(t, time.Now().Add(time.Hour), time.Time{})
	if _, err := e.lock(r, nil); err == nil || !strings.Contains(err.Error(), "after the build host's clock") {
		t.Errorf("Release dated an hour ahead: %v", err)
	}
	e.archive.SetDates(t, time.Now().Add(-48*time.Hour), time.Now().Add(-time.Hour))
	if _, err := e.lock(r, nil); err == nil || !strings.Contains(err.Error(), "(Valid-Until; now ") || !strings.Contains(err.Error(), "the mirror is stale") {
		t.Errorf("expired Release: %v", err)
	}
	e.archive.SetDates(t, time.Now().Add(-48*time.Hour), time.Now().Add(time.Hour))
	if _, err := e.lock(r, nil); err != nil {
		t.Errorf("valid Release refused: %v", err)
	}
}
