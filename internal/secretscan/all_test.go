package secretscan

import (
	"bytes"
	"encoding/base64"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// TestTreeAllNamesEachSecret: each file is read once and every secret it
// holds is a hit of its own, named; a file holding none is no hit.
func TestTreeAllNamesEachSecret(t *testing.T) {
	dir := t.TempDir()
	sts, acr := "0123456789abcdef0123456789abcdef01234567", "acr-00112233445566778899AABBCCDDEEFF"
	files := map[string]string{
		"log/a":   "user: cr_temp_user password: " + acr + "\n",
		"lib/b":   "x: " + base64.StdEncoding.EncodeToString([]byte(`{"AccessKeySecret":"`+sts+`"}`)) + "\n",
		"lib/c":   sts + " and " + acr,
		"clean/d": "nothing here",
	}
	for p, c := range files {
		os.MkdirAll(filepath.Join(dir, filepath.Dir(p)), 0o755)
		os.WriteFile(filepath.Join(dir, p), []byte(c), 0o644)
	}
	hits, err := TreeAll(dir, []Secret{{"STS AccessKeySecret", []byte(sts)}, {"ACR password", []byte(acr)}, {"empty", nil}})
	if err != nil {
		t.Fatal(err)
	}
	var got []string
	for _, h := range hits {
		got = append(got, h.String())
	}
	want := []string{
		"lib/b (STS AccessKeySecret, base64 at 3 → plain)",
		"lib/c (STS AccessKeySecret, plain)",
		"lib/c (ACR password, plain)",
		"log/a (ACR password, plain)",
	}
	if strings.Join(got, "\n") != strings.Join(want, "\n") {
		t.Errorf("hits:\n%s\nwant:\n%s", strings.Join(got, "\n"), strings.Join(want, "\n"))
	}
}

// TestRawAll finds each secret's plain and base64 forms in one read.
func TestRawAll(t *testing.T) {
	a, b := []byte("first-secret-0123456789"), []byte("second-secret-9876543210")
	data := bytes.Repeat([]byte{0}, 100)
	data = append(data, a...)
	data = append(data, bytes.Repeat([]byte{0}, 5<<20)...)
	data = append(data, base64.StdEncoding.EncodeToString(b)...)
	offs, err := RawAll(bytes.NewReader(data), [][]byte{a, b, nil})
	if err != nil {
		t.Fatal(err)
	}
	if len(offs) != 2 || offs[0] != 100 || offs[1] != int64(100+len(a)+5<<20) {
		t.Errorf("RawAll = %v", offs)
	}
}
