//go:build integration

package verity

import (
	"bytes"
	"encoding/hex"
	"errors"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"testing"
)

// veritysetup finds the tool; it lives in sbin, which a non-root PATH may lack.
func veritysetup(t *testing.T) string {
	t.Helper()
	if p, err := exec.LookPath("veritysetup"); err == nil {
		return p
	}
	for _, p := range []string{"/usr/sbin/veritysetup", "/sbin/veritysetup"} {
		if _, err := os.Stat(p); err == nil {
			return p
		}
	}
	t.Fatal("veritysetup not found: install the Debian package cryptsetup-bin (apt-get install -y cryptsetup-bin)")
	return ""
}

func run(t *testing.T, name string, args ...string) (string, error) {
	t.Helper()
	out, err := exec.Command(name, args...).CombinedOutput()
	return string(out), err
}

// dumpFields parses `veritysetup dump` output ("Key:   value" lines).
func dumpFields(out string) map[string]string {
	f := map[string]string{}
	for _, line := range strings.Split(out, "\n") {
		k, v, ok := strings.Cut(line, ":")
		if ok {
			f[strings.TrimSpace(k)] = strings.TrimSpace(v)
		}
	}
	return f
}

var rootHashLine = regexp.MustCompile(`(?m)^Root hash:\s+([0-9a-f]+)$`)

func TestVeritysetupCompatibility(t *testing.T) {
	vs := veritysetup(t)
	if out, err := run(t, vs, "--version"); err == nil {
		t.Logf("using %s", strings.TrimSpace(out))
	}
	sparse := make([]byte, (16384+1)*4096) // 3 tree levels, mostly zero blocks
	copy(sparse[4096*7:], randomData(4096))
	copy(sparse[len(sparse)-4096:], randomData(4096)[:100])
	tests := []struct {
		name string
		data []byte
	}{
		{"4KiB", randomData(4096)},
		{"1MiB", randomData(1 << 20)},
		{"40MiB+12KiB", randomData(40<<20 + 3*4096)},
		{"64MiB+4KiB sparse", sparse},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			dir := t.TempDir()
			dataPath, hashPath, refPath := filepath.Join(dir, "data"), filepath.Join(dir, "hash"), filepath.Join(dir, "hash.ref")
			if err := os.WriteFile(dataPath, tt.data, 0o644); err != nil {
				t.Fatal(err)
			}
			dataFile, err := os.Open(dataPath)
			if err != nil {
				t.Fatal(err)
			}
			defer dataFile.Close()
			digest, err := ContentDigest(dataFile, int64(len(tt.data)))
			if err != nil {
				t.Fatal(err)
			}
			p := DeriveParams(digest)
			hashFile, err := os.Create(hashPath)
			if err != nil {
				t.Fatal(err)
			}
			res, err := Write(dataFile, int64(len(tt.data)), hashFile, p)
			if cerr := hashFile.Close(); err == nil {
				err = cerr
			}
			if err != nil {
				t.Fatalf("Write: %v", err)
			}
			rootHex := hex.EncodeToString(res.RootHash)
			t.Logf("data %d bytes, %d blocks, hash area %d bytes, root %s", len(tt.data), res.DataBlocks, res.HashSize, rootHex)

			// veritysetup accepts our tree.
			if out, err := run(t, vs, "verify", dataPath, hashPath, rootHex); err != nil {
				t.Fatalf("veritysetup verify rejected our hash tree: %v\n%s", err, out)
			}

			// veritysetup parses our superblock.
			out, err := run(t, vs, "dump", hashPath)
			if err != nil {
				t.Fatalf("veritysetup dump: %v\n%s", err, out)
			}
			f := dumpFields(out)
			for k, want := range map[string]string{
				"UUID":            FormatGUID(p.UUID),
				"Hash type":       "1",
				"Data blocks":     strconv.FormatUint(res.DataBlocks, 10),
				"Data block size": "4096",
				"Hash block size": "4096",
				"Hash algorithm":  "sha256",
				"Salt":            hex.EncodeToString(p.Salt),
			} {
				if f[k] != want {
					t.Errorf("veritysetup dump %s = %q, want %q\n%s", k, f[k], want, out)
				}
			}

			// veritysetup format with the same salt and UUID writes the same bytes.
			if err := os.WriteFile(refPath, nil, 0o644); err != nil {
				t.Fatal(err)
			}
			out, err = run(t, vs, "format", "--salt="+hex.EncodeToString(p.Salt), "--uuid="+FormatGUID(p.UUID), dataPath, refPath)
			if err != nil {
				t.Fatalf("veritysetup format: %v\n%s", err, out)
			}
			m := rootHashLine.FindStringSubmatch(out)
			if m == nil || m[1] != rootHex {
				t.Errorf("veritysetup format root hash = %v, ours %s\n%s", m, rootHex, out)
			}
			ours, _ := os.ReadFile(hashPath)
			ref, _ := os.ReadFile(refPath)
			if !bytes.Equal(ours, ref) {
				t.Errorf("hash area differs from veritysetup's: ours %d bytes, veritysetup %d bytes, first difference at %d",
					len(ours), len(ref), firstDiff(ours, ref))
			}

			// Our Verify accepts it too.
			hashRead, err := os.Open(hashPath)
			if err != nil {
				t.Fatal(err)
			}
			defer hashRead.Close()
			if err := Verify(dataFile, int64(len(tt.data)), hashRead, res.RootHash); err != nil {
				t.Errorf("Verify: %v", err)
			}

			// A flipped data byte makes both veritysetup and Verify fail.
			flip := int64(len(tt.data)) * 2 / 3
			corrupt := bytes.Clone(tt.data)
			corrupt[flip] ^= 0x40
			if err := os.WriteFile(dataPath, corrupt, 0o644); err != nil {
				t.Fatal(err)
			}
			if out, err := run(t, vs, "verify", dataPath, hashPath, rootHex); err == nil || !strings.Contains(out, "Verification") {
				t.Errorf("veritysetup verify of data with a flipped byte at %d = %v, want a verification failure\n%s", flip, err, out)
			}
			var ce *CorruptionError
			err = Verify(bytes.NewReader(corrupt), int64(len(corrupt)), hashRead, res.RootHash)
			if !errors.As(err, &ce) || !ce.Data || ce.Block != uint64(flip/4096) {
				t.Errorf("Verify of corrupt data = %v, want data block %d corrupt", err, flip/4096)
			}
		})
	}
}

func firstDiff(a, b []byte) int {
	for i := range min(len(a), len(b)) {
		if a[i] != b[i] {
			return i
		}
	}
	return min(len(a), len(b))
}

// Verify reads trees veritysetup made with its own defaults, including an
// empty salt, which drover never writes but the format allows.
func TestVerifyAcceptsVeritysetupTrees(t *testing.T) {
	vs := veritysetup(t)
	dir := t.TempDir()
	data := randomData(200 * 4096)
	dataPath := filepath.Join(dir, "data")
	if err := os.WriteFile(dataPath, data, 0o644); err != nil {
		t.Fatal(err)
	}
	for _, salt := range []string{"", "-"} {
		hashPath := filepath.Join(dir, "hash"+salt)
		if err := os.WriteFile(hashPath, nil, 0o644); err != nil {
			t.Fatal(err)
		}
		args := []string{"format", dataPath, hashPath}
		if salt != "" {
			args = append(args, "--salt="+salt)
		}
		out, err := run(t, vs, args...)
		if err != nil {
			t.Fatalf("veritysetup %v: %v\n%s", args, err, out)
		}
		m := rootHashLine.FindStringSubmatch(out)
		if m == nil {
			t.Fatalf("no root hash in veritysetup output:\n%s", out)
		}
		root, _ := hex.DecodeString(m[1])
		hash, _ := os.ReadFile(hashPath)
		if err := Verify(bytes.NewReader(data), int64(len(data)), bytes.NewReader(hash), root); err != nil {
			t.Errorf("Verify of veritysetup %v tree: %v", args, err)
		}
	}
}
