package debian

import (
	"bytes"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/ProtonMail/go-crypto/openpgp"
	"github.com/ProtonMail/go-crypto/openpgp/armor"
	"github.com/ProtonMail/go-crypto/openpgp/clearsign"
	"github.com/ProtonMail/go-crypto/openpgp/packet"
)

// keyTime is when the test keys are made; keyNow is the verification time.
var (
	keyTime = time.Date(2025, 1, 1, 0, 0, 0, 0, time.UTC)
	keyNow  = time.Date(2025, 8, 10, 0, 0, 0, 0, time.UTC)
)

var (
	keysOnce                sync.Once
	edKey, rsaKey, otherKey *openpgp.Entity
)

// testKeys makes an Ed25519 archive key (what Debian signs trixie with), an
// RSA one, and an unrelated Ed25519 key, once per test binary: RSA key
// generation is slow.
func testKeys(t testing.TB) (ed, rsa, other *openpgp.Entity) {
	t.Helper()
	keysOnce.Do(func() {
		mk := func(name string, cfg *packet.Config) *openpgp.Entity {
			cfg.Time = func() time.Time { return keyTime }
			e, err := openpgp.NewEntity(name, "test", name+"@example.invalid", cfg)
			if err != nil {
				t.Fatalf("generating %s key: %v", name, err)
			}
			return e
		}
		edKey = mk("ed25519 archive", &packet.Config{Algorithm: packet.PubKeyAlgoEdDSA})
		rsaKey = mk("rsa archive", &packet.Config{Algorithm: packet.PubKeyAlgoRSA, RSABits: 2048})
		otherKey = mk("unrelated", &packet.Config{Algorithm: packet.PubKeyAlgoEdDSA})
	})
	if edKey == nil {
		t.Fatal("test key generation failed earlier")
	}
	return edKey, rsaKey, otherKey
}

// clearsignWith signs text with every key, as Debian's archive does.
func clearsignWith(t testing.TB, text string, keys ...*openpgp.Entity) []byte {
	t.Helper()
	var privs []*packet.PrivateKey
	for _, k := range keys {
		privs = append(privs, k.PrivateKey)
	}
	var buf bytes.Buffer
	w, err := clearsign.EncodeMulti(&buf, privs, &packet.Config{Time: func() time.Time { return keyTime.Add(time.Hour) }})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := w.Write([]byte(text)); err != nil {
		t.Fatal(err)
	}
	if err := w.Close(); err != nil {
		t.Fatal(err)
	}
	return buf.Bytes()
}

const sampleRelease = `Origin: Debian
Label: Debian
Suite: stable
Version: 13.0
Codename: trixie
Changelogs: https://metadata.example.invalid/changelogs/@CHANGEPATH@_changelog
Date: Sat, 09 Aug 2025 09:27:52 UTC
Acquire-By-Hash: yes
No-Support-for-Architecture-all: Packages
Architectures: all amd64 arm64
Components: main contrib non-free-firmware non-free
Description: Debian 13.0 Released 09 August 2025
MD5Sum:
 0ed6d4c8891eb86358b94bb35d9e4da4  1484322 contrib/Contents-all
SHA256:
 aaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaa 64558 main/binary-amd64/Packages.xz
 BBBBBBBBBBBBBBBBBBBBBBBBBBBBBBBBBBBBBBBBBBBBBBBBBBBBBBBBBBBBBBBB   360000 main/binary-amd64/Packages
 cccccccccccccccccccccccccccccccccccccccccccccccccccccccccccccccc      117 main/binary-amd64/Release
`

func TestParseRelease(t *testing.T) {
	rel, err := ParseRelease([]byte(sampleRelease))
	if err != nil {
		t.Fatal(err)
	}
	wantDate := time.Date(2025, 8, 9, 9, 27, 52, 0, time.UTC)
	if rel.Origin != "Debian" || rel.Suite != "stable" || rel.Codename != "trixie" || rel.Version != "13.0" || rel.Name() != "trixie" {
		t.Errorf("identity fields = %+v", rel)
	}
	if !rel.Date.Equal(wantDate) || !rel.ValidUntil.IsZero() || !rel.AcquireByHash {
		t.Errorf("Date %v ValidUntil %v AcquireByHash %v", rel.Date, rel.ValidUntil, rel.AcquireByHash)
	}
	if strings.Join(rel.Architectures, " ") != "all amd64 arm64" || strings.Join(rel.Components, " ") != "main contrib non-free-firmware non-free" {
		t.Errorf("Architectures %v Components %v", rel.Architectures, rel.Components)
	}
	if len(rel.Files) != 3 {
		t.Fatalf("Files = %+v, want the 3 SHA256 entries only", rel.Files)
	}
	f, ok := rel.File("main/binary-amd64/Packages")
	if !ok || f.Size != 360000 || f.SHA256 != strings.Repeat("b", 64) {
		t.Errorf("File(Packages) = %+v, %v (hash must be lower-cased)", f, ok)
	}
	if _, ok := rel.File("contrib/Contents-all"); ok {
		t.Error("MD5Sum entries must not be listed as files")
	}
}

func TestParseReleaseErrors(t *testing.T) {
	for name, text := range map[string]string{
		"no suite":  "Origin: Debian\nSHA256:\n " + strings.Repeat("a", 64) + " 1 x\n",
		"no files":  "Codename: trixie\n",
		"bad size":  "Codename: trixie\nSHA256:\n " + strings.Repeat("a", 64) + " -1 x\n",
		"bad hash":  "Codename: trixie\nSHA256:\n abc 1 x\n",
		"bad date":  "Codename: trixie\nDate: yesterday\nSHA256:\n " + strings.Repeat("a", 64) + " 1 x\n",
		"not field": "Codename trixie\n",
	} {
		if _, err := ParseRelease([]byte(text)); err == nil {
			t.Errorf("%s: ParseRelease succeeded", name)
		}
	}
}

func TestParseReleaseTime(t *testing.T) {
	want := time.Date(2025, 8, 9, 9, 27, 52, 0, time.UTC)
	for _, s := range []string{
		"Sat, 09 Aug 2025 09:27:52 UTC",
		"Sat, 09 Aug 2025 09:27:52 +0000",
		"Sat, 9 Aug 2025 09:27:52 UTC",
		"Sat,  9 Aug 2025 09:27:52 UTC",
		"Sat, 09 Aug 2025 11:27:52 +0200",
		"09 Aug 2025 09:27:52 UTC",
	} {
		got, err := parseReleaseTime(s)
		if err != nil || !got.Equal(want) {
			t.Errorf("parseReleaseTime(%q) = %v, %v; want %v", s, got, err, want)
		}
	}
}

func TestVerifyInRelease(t *testing.T) {
	ed, rsa, other := testKeys(t)
	archive := openpgp.EntityList{ed, rsa}

	t.Run("ed25519 signature accepted", func(t *testing.T) {
		data := clearsignWith(t, sampleRelease, ed)
		rel, err := VerifyInRelease(data, archive, keyNow)
		if err != nil {
			t.Fatal(err)
		}
		sum := sha256.Sum256(data)
		if rel.SHA256 != hex.EncodeToString(sum[:]) {
			t.Errorf("SHA256 = %s, want the hash of the whole InRelease", rel.SHA256)
		}
		if rel.Codename != "trixie" || len(rel.Files) != 3 {
			t.Errorf("parsed %+v", rel)
		}
		if want := strings.ToUpper(hex.EncodeToString(ed.PrimaryKey.Fingerprint)); rel.SignedBy != want {
			t.Errorf("SignedBy = %s, want %s", rel.SignedBy, want)
		}
	})
	t.Run("rsa signature accepted", func(t *testing.T) {
		if _, err := VerifyInRelease(clearsignWith(t, sampleRelease, rsa), archive, keyNow); err != nil {
			t.Fatal(err)
		}
	})
	t.Run("tampered body rejected", func(t *testing.T) {
		data := clearsignWith(t, sampleRelease, ed, rsa)
		bad := bytes.Replace(data, []byte("64558 main/binary-amd64/Packages.xz"), []byte("64559 main/binary-amd64/Packages.xz"), 1)
		if bytes.Equal(bad, data) {
			t.Fatal("tampering did not change the data")
		}
		_, err := VerifyInRelease(bad, archive, keyNow)
		var se *SignatureError
		if !errors.As(err, &se) {
			t.Fatalf("err = %v, want a SignatureError", err)
		}
	})
	t.Run("unknown key rejected", func(t *testing.T) {
		_, err := VerifyInRelease(clearsignWith(t, sampleRelease, other), archive, keyNow)
		var se *SignatureError
		if !errors.As(err, &se) {
			t.Fatalf("err = %v, want a SignatureError", err)
		}
		se.KeyringPath = "/keys/archive.gpg"
		msg := se.Error()
		for _, want := range []string{"InRelease for trixie is signed by key ", "which is not in keyring /keys/archive.gpg", "pass --keyring"} {
			if !strings.Contains(msg, want) {
				t.Errorf("error %q lacks %q", msg, want)
			}
		}
		if id := strings.ToUpper(hex.EncodeToString(other.PrimaryKey.Fingerprint)); !strings.Contains(msg, id) && !strings.Contains(msg, other.PrimaryKey.KeyIdString()) {
			t.Errorf("error %q does not name the signing key %s", msg, id)
		}
	})
	t.Run("one good and one unknown signature accepted", func(t *testing.T) {
		for _, order := range [][]*openpgp.Entity{{other, ed}, {ed, other}} {
			if _, err := VerifyInRelease(clearsignWith(t, sampleRelease, order...), openpgp.EntityList{ed}, keyNow); err != nil {
				t.Fatal(err)
			}
		}
	})
	t.Run("a bad signature by a known key does not hide a good one", func(t *testing.T) {
		// Signature 1: ed's, over other text. Signature 2: rsa's, over this
		// text. go-crypto alone would stop at the first known issuer.
		stale := clearsignWith(t, strings.Replace(sampleRelease, "13.0", "13.1", 1), ed)
		good := clearsignWith(t, sampleRelease, rsa)
		data := spliceSignatures(t, good, stale, good)
		if b, _ := clearsign.Decode(data); b == nil {
			t.Fatal("spliced InRelease does not decode")
		} else if _, err := b.VerifySignature(archive, nil); err == nil {
			t.Fatal("test setup: go-crypto alone accepts the spliced block, so this case proves nothing")
		}
		if _, err := VerifyInRelease(data, archive, keyNow); err != nil {
			t.Fatal(err)
		}
	})
	t.Run("expired Valid-Until rejected", func(t *testing.T) {
		text := strings.Replace(sampleRelease, "Acquire-By-Hash", "Valid-Until: Sun, 10 Aug 2025 09:27:52 UTC\nAcquire-By-Hash", 1)
		data := clearsignWith(t, text, ed)
		if _, err := VerifyInRelease(data, archive, keyNow); err != nil {
			t.Fatalf("before Valid-Until: %v", err)
		}
		_, err := VerifyInRelease(data, archive, keyNow.Add(72*time.Hour))
		if err == nil || !strings.Contains(err.Error(), "Valid-Until") {
			t.Fatalf("after Valid-Until: err = %v", err)
		}
	})
	t.Run("Date in the future rejected", func(t *testing.T) {
		data := clearsignWith(t, sampleRelease, ed) // Date: Sat, 09 Aug 2025 09:27:52 UTC
		date := time.Date(2025, 8, 9, 9, 27, 52, 0, time.UTC)
		if _, err := VerifyInRelease(data, archive, date.Add(-MaxFutureDate)); err != nil {
			t.Fatalf("Date within the allowed skew: %v", err)
		}
		_, err := VerifyInRelease(data, archive, date.Add(-MaxFutureDate-time.Second))
		if err == nil || !strings.Contains(err.Error(), "InRelease for trixie is dated Sat, 09 Aug 2025 09:27:52 UTC, after the build host's clock") {
			t.Fatalf("future Date: err = %v", err)
		}
	})
	t.Run("not clearsigned", func(t *testing.T) {
		if _, err := VerifyInRelease([]byte(sampleRelease), archive, keyNow); err == nil {
			t.Fatal("unsigned Release accepted")
		}
	})
}

// spliceSignatures returns the cleartext part of text followed by one armored
// block holding the signature packets of each of sigsFrom, in order.
func spliceSignatures(t *testing.T, text []byte, sigsFrom ...[]byte) []byte {
	t.Helper()
	head := text[:bytes.Index(text, []byte("-----BEGIN PGP SIGNATURE-----"))]
	var packets bytes.Buffer
	for _, s := range sigsFrom {
		b, _ := clearsign.Decode(s)
		if b == nil {
			t.Fatal("decoding test signature")
		}
		raw, _, err := splitSignatures(b.ArmoredSignature.Body)
		if err != nil {
			t.Fatal(err)
		}
		for _, p := range raw {
			packets.Write(p)
		}
	}
	out := bytes.NewBuffer(append([]byte{}, head...))
	w, err := armor.Encode(out, "PGP SIGNATURE", nil)
	if err != nil {
		t.Fatal(err)
	}
	w.Write(packets.Bytes())
	w.Close()
	out.WriteString("\n")
	return out.Bytes()
}

func TestLoadKeyring(t *testing.T) {
	ed, rsa, _ := testKeys(t)
	dir := t.TempDir()
	var bin bytes.Buffer
	for _, e := range []*openpgp.Entity{ed, rsa} {
		if err := e.Serialize(&bin); err != nil {
			t.Fatal(err)
		}
	}
	var arm bytes.Buffer
	w, err := armor.Encode(&arm, openpgp.PublicKeyType, nil)
	if err != nil {
		t.Fatal(err)
	}
	w.Write(bin.Bytes())
	w.Close()

	for name, data := range map[string][]byte{"keys.gpg": bin.Bytes(), "keys.asc": arm.Bytes()} {
		path := filepath.Join(dir, name)
		if err := os.WriteFile(path, data, 0o644); err != nil {
			t.Fatal(err)
		}
		keys, err := LoadKeyring(path)
		if err != nil {
			t.Fatalf("%s: %v", name, err)
		}
		if len(keys) != 2 {
			t.Fatalf("%s: %d keys, want 2", name, len(keys))
		}
		if _, err := VerifyInRelease(clearsignWith(t, sampleRelease, ed), keys, keyNow); err != nil {
			t.Errorf("%s: verifying with the loaded public keys: %v", name, err)
		}
	}
	if _, err := LoadKeyring(filepath.Join(dir, "missing.gpg")); err == nil || !strings.Contains(err.Error(), "missing.gpg") {
		t.Errorf("missing keyring: err = %v, want one naming the path", err)
	}
	empty := filepath.Join(dir, "empty.gpg")
	os.WriteFile(empty, nil, 0o644)
	if _, err := LoadKeyring(empty); err == nil {
		t.Error("empty keyring accepted")
	}
}

// TestVerifyInReleaseExpiredOrRevokedKey: a signature by a key of the
// keyring that has since expired or been revoked is refused, and the
// message says which of the two, not that the key is unknown.
func TestVerifyInReleaseExpiredOrRevokedKey(t *testing.T) {
	at := func(d time.Duration) func() time.Time { return func() time.Time { return keyTime.Add(d) } }
	mk := func(name string, lifetime uint32) *openpgp.Entity {
		e, err := openpgp.NewEntity(name, "test", name+"@example.invalid",
			&packet.Config{Algorithm: packet.PubKeyAlgoEdDSA, Time: at(0), KeyLifetimeSecs: lifetime})
		if err != nil {
			t.Fatal(err)
		}
		return e
	}
	// Expires 2025-08-09 12:00, between the Release's Date and keyNow.
	shortLived := mk("short-lived archive", uint32(time.Date(2025, 8, 9, 12, 0, 0, 0, time.UTC).Sub(keyTime)/time.Second))
	revoked := mk("revoked archive", 0)
	if err := revoked.RevokeKey(packet.KeyCompromised, "compromised", &packet.Config{Time: at(2 * time.Hour)}); err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		name string
		key  *openpgp.Entity
		want []string
	}{
		{"expired", shortLived, []string{"which had expired at Sun, 10 Aug 2025 00:00:00 UTC (the build host's clock): refused", "check the host's clock"}},
		{"revoked", revoked, []string{"which is revoked: refused", "whose export must be committed to the trust root"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			data := clearsignWith(t, sampleRelease, tc.key) // signed an hour after the key was made
			if _, err := VerifyInRelease(data, openpgp.EntityList{tc.key}, time.Date(2025, 8, 9, 10, 0, 0, 0, time.UTC)); tc.name == "expired" && err != nil {
				t.Fatalf("while the key was valid: %v", err)
			}
			_, err := VerifyInRelease(data, openpgp.EntityList{tc.key}, keyNow)
			var se *SignatureError
			if !errors.As(err, &se) {
				t.Fatalf("err = %v, want a SignatureError", err)
			}
			fp := strings.ToUpper(hex.EncodeToString(tc.key.PrimaryKey.Fingerprint))
			msg := se.Error()
			for _, w := range append(tc.want, "InRelease for trixie is signed by key "+fp+" of the keyring") {
				if !strings.Contains(msg, w) {
					t.Errorf("error %q lacks %q", msg, w)
				}
			}
			if strings.Contains(msg, "not in") {
				t.Errorf("error %q says the key is not in the keyring", msg)
			}
		})
	}
}

// TestVerifyPinnedInRelease: a Release the lock pinned is still checked
// for who signed it and for which suite it is, but not for its age: its
// Valid-Until passing is what happens to every pinned Release.
func TestVerifyPinnedInRelease(t *testing.T) {
	ed, _, other := testKeys(t)
	archive := openpgp.EntityList{ed}
	stale := strings.Replace(sampleRelease, "Acquire-By-Hash: yes\n", "Acquire-By-Hash: yes\nValid-Until: Sat, 16 Aug 2025 09:27:52 UTC\n", 1)
	data := clearsignWith(t, stale, ed)
	later := keyNow.AddDate(0, 1, 0)
	if _, err := VerifyInRelease(data, archive, later); err == nil || !strings.Contains(err.Error(), "expired at") {
		t.Fatalf("VerifyInRelease a month after Valid-Until: %v, want it refused as expired", err)
	}
	rel, err := VerifyPinnedInRelease(data, archive, later)
	if err != nil || rel.Codename != "trixie" || !bytes.Equal(rel.Data, data) {
		t.Fatalf("VerifyPinnedInRelease: %v, %+v", err, rel)
	}
	var se *SignatureError
	if _, err := VerifyPinnedInRelease(clearsignWith(t, stale, other), archive, later); !errors.As(err, &se) {
		t.Fatalf("another key's signature: %v, want a SignatureError", err)
	}
	bad := bytes.Replace(data, []byte("64558 main"), []byte("64559 main"), 1)
	if _, err := VerifyPinnedInRelease(bad, archive, later); !errors.As(err, &se) {
		t.Fatalf("tampered body: %v, want a SignatureError", err)
	}

	c := &Client{Keyring: archive, KeyringPath: "k.asc"}
	if _, err := c.PinnedRelease(data, "trixie-updates", "the cache"); err == nil || err.Error() != `InRelease from the cache is for suite "stable" (codename "trixie"), not "trixie-updates": check the mirror` {
		t.Errorf("PinnedRelease for another suite: %v", err)
	}
	if rel, err := c.PinnedRelease(data, "trixie", "the cache"); err != nil || rel.SHA256 == "" {
		t.Errorf("PinnedRelease: %v", err)
	}
}
