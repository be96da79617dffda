package keys

import (
	"bufio"
	"bytes"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/ProtonMail/go-crypto/openpgp"
)

// fingerprints reads an armored key file and returns each primary key's
// fingerprint with its user IDs.
func fingerprints(t *testing.T, data []byte) map[string][]string {
	t.Helper()
	ring, err := openpgp.ReadArmoredKeyRing(bytes.NewReader(data))
	if err != nil {
		t.Fatal(err)
	}
	out := map[string][]string{}
	for _, e := range ring {
		fp := strings.ToUpper(fmt.Sprintf("%x", e.PrimaryKey.Fingerprint))
		for id := range e.Identities {
			out[fp] = append(out[fp], id)
		}
	}
	return out
}

// TestEachLockedSignerIsInTheTrustRoot: every "signer" line of the
// repository's locks names a key of the committed trust root for that
// suite, so a fresh checkout can fetch what the lock pins.
func TestEachLockedSignerIsInTheTrustRoot(t *testing.T) {
	n := 0
	locks, err := filepath.Glob("../*.lock")
	if err != nil || len(locks) == 0 {
		t.Fatalf("no locks beside the recipes: %v", err)
	}
	for _, lock := range locks {
		f, err := os.Open(lock)
		if err != nil {
			t.Fatal(err)
		}
		sc := bufio.NewScanner(f)
		sc.Buffer(nil, 1<<20)
		for sc.Scan() {
			fields := strings.Fields(sc.Text())
			if len(fields) < 3 || fields[0] != "signer" {
				continue
			}
			n++
			data, name, err := Debian(fields[1])
			if err != nil {
				t.Fatalf("%s: %v", lock, err)
			}
			if _, ok := fingerprints(t, data)[fields[2]]; !ok {
				t.Errorf("%s: suite %s signed by %s, which is not a primary key in %s", lock, fields[1], fields[2], name)
			}
		}
		f.Close()
	}
	if n == 0 {
		t.Fatal("no signer lines in the locks")
	}
}

// TestTrustRootHoldsOnlyTheSuitesOwnKeys: each suite's file holds that
// release's automatic and stable keys, and not the previous release's
// automatic key that the archive also signs with.
func TestTrustRootHoldsOnlyTheSuitesOwnKeys(t *testing.T) {
	for _, c := range []struct {
		suite, release string
		keys           int
	}{
		{"trixie", "13/trixie", 2}, {"bookworm", "12/bookworm", 2},
		{"trixie-updates", "13/trixie", 2},
		// The security archive has one automatic key per release, and only
		// the security archive's key may sign its suites.
		{"trixie-security", "Debian Security Archive Automatic Signing Key (13/trixie)", 1},
		{"bookworm-security", "Debian Security Archive Automatic Signing Key (12/bookworm)", 1},
	} {
		data, name, err := Debian(c.suite)
		if err != nil {
			t.Fatal(err)
		}
		release := c.release
		keys := fingerprints(t, data)
		if len(keys) != c.keys {
			t.Errorf("%s holds %d keys, want %d", name, len(keys), c.keys)
		}
		for fp, ids := range keys {
			if !strings.Contains(strings.Join(ids, "; "), release) {
				t.Errorf("%s: key %s (%s) is not a %s key", name, fp, strings.Join(ids, "; "), release)
			}
		}
	}
	if _, _, err := Debian("sid"); err == nil || !strings.Contains(err.Error(), `"sid"`) || !strings.Contains(err.Error(), "--keyring") {
		t.Errorf("unknown suite: %v", err)
	}
}
