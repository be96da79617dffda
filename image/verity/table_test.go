package verity

import (
	"bytes"
	"testing"
)

func TestTable(t *testing.T) {
	r := &Result{
		RootHash:      bytes.Repeat([]byte{0xab}, 32),
		DataBlocks:    2560,
		DataBlockSize: 4096,
		HashBlockSize: 4096,
		Salt:          []byte{0x01, 0x02},
	}
	const base = "1 /dev/vda2 /dev/vda3 4096 4096 2560 1 sha256 " +
		"abababababababababababababababababababababababababababababababab 0102"
	tests := []struct {
		name string
		opts []string
		want string
	}{
		{"no options", nil, base},
		{"restart and panic", []string{"restart_on_corruption", "panic_on_corruption"},
			base + " 2 restart_on_corruption panic_on_corruption"},
		{"multi-word option counts words", []string{"use_fec_from_device /dev/vda4", "ignore_zero_blocks"},
			base + " 3 use_fec_from_device /dev/vda4 ignore_zero_blocks"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if got := Table("/dev/vda2", "/dev/vda3", r, tt.opts...); got != tt.want {
				t.Errorf("Table =\n%q\nwant\n%q", got, tt.want)
			}
		})
	}
	unsalted := *r
	unsalted.Salt = nil
	if got, want := Table("a", "b", &unsalted), "1 a b 4096 4096 2560 1 sha256 "+
		"abababababababababababababababababababababababababababababababab -"; got != want {
		t.Errorf("Table without salt = %q, want %q", got, want)
	}
	if got := r.DataSectors(); got != 2560*8 {
		t.Errorf("DataSectors = %d, want %d", got, 2560*8)
	}
}

func TestPartitionUUIDs(t *testing.T) {
	root := mustHex(t, "00112233445566778899aabbccddeeff"+"0123456789abcdeffedcba9876543210")
	r, v := PartitionUUIDs(root)
	// No RFC 4122 version/variant bits: systemd compares the raw halves.
	if got, want := FormatGUID(r), "00112233-4455-6677-8899-aabbccddeeff"; got != want {
		t.Errorf("root partition UUID = %s, want %s", got, want)
	}
	if got, want := FormatGUID(v), "01234567-89ab-cdef-fedc-ba9876543210"; got != want {
		t.Errorf("verity partition UUID = %s, want %s", got, want)
	}
	if r, v := PartitionUUIDs([]byte{1, 2, 3}); r != ([16]byte{}) || v != ([16]byte{}) {
		t.Errorf("PartitionUUIDs(short) = %x, %x, want zero", r, v)
	}
}
