package boot

import (
	"errors"
	"os"
	"path/filepath"
	"testing"
)

func TestChooseMachineID(t *testing.T) {
	uuid := func() (string, error) { return "9A1B2C3D-4E5F-4061-8172-93A4B5C6D7E8\n", nil }
	const fresh = "9a1b2c3d4e5f4061817293a4b5c6d7e8"
	cases := []struct {
		stored    string
		want      string
		generated bool
	}{
		{"", fresh, true},
		{"0123456789abcdef0123456789abcdef\n", "0123456789abcdef0123456789abcdef", false},
		{"0123456789ABCDEF0123456789ABCDEF", fresh, true}, // systemd wants lowercase
		{"00000000000000000000000000000000", fresh, true},
		{"uninitialized\n", fresh, true},
		{"0123456789abcdef", fresh, true},
	}
	for _, c := range cases {
		id, gen, err := ChooseMachineID(c.stored, uuid)
		if err != nil || id != c.want || gen != c.generated {
			t.Errorf("ChooseMachineID(%q) = %q, %v, %v", c.stored, id, gen, err)
		}
	}
	if _, _, err := ChooseMachineID("", func() (string, error) { return "", errors.New("no proc") }); err == nil {
		t.Error("uuid read error swallowed")
	}
	if _, _, err := ChooseMachineID("", func() (string, error) { return "not-a-uuid", nil }); err == nil {
		t.Error("bad uuid accepted")
	}
}

func TestKeepMachineID(t *testing.T) {
	root := t.TempDir()
	if err := os.MkdirAll(filepath.Join(root, "etc"), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(root, EtcMachineIDPath), nil, 0o444); err != nil {
		t.Fatal(err)
	}
	n := 0
	uuid := func() (string, error) {
		n++
		return []string{"", "11111111-2222-4333-8444-555555555555", "66666666-7777-4888-9999-aaaaaaaaaaaa"}[n], nil
	}
	id1, gen1, err := KeepMachineID(root, uuid)
	if err != nil || !gen1 || id1 != "11111111222243338444555555555555" {
		t.Fatalf("first boot: %q %v %v", id1, gen1, err)
	}
	// Next boot: /etc is rebuilt from the image (empty machine-id), /var kept.
	if err := os.WriteFile(filepath.Join(root, EtcMachineIDPath), nil, 0o444); err != nil {
		t.Fatal(err)
	}
	id2, gen2, err := KeepMachineID(root, uuid)
	if err != nil || gen2 || id2 != id1 {
		t.Fatalf("second boot: %q %v %v, want %q kept", id2, gen2, err, id1)
	}
	for _, p := range []string{StoredMachineIDPath, EtcMachineIDPath} {
		b, err := os.ReadFile(filepath.Join(root, p))
		if err != nil || string(b) != id1+"\n" {
			t.Errorf("%s = %q, %v", p, b, err)
		}
	}
	if n != 1 {
		t.Errorf("random uuid read %d times, want once", n)
	}
}
