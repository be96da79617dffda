package dm

import (
	"bytes"
	"encoding/binary"
	"encoding/hex"
	"flag"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

var update = flag.Bool("update", false, "rewrite the golden files in testdata/")

// verityTarget is the table drover-init loads for a 1 GiB root (values
// are examples; the layout is what the test pins).
var verityTarget = Target{
	Start:  0,
	Length: 2097152,
	Type:   "verity",
	Params: "1 /dev/vda2 /dev/vda3 4096 4096 262144 1 sha256 " +
		"a5b39e4b3c6b8f8d0b0f2b6a7c1f43c9f0b6e0c4f1f8d1d1e2e3e4e5e6e7e8e9 " +
		"00112233445566778899aabbccddeeff00112233445566778899aabbccddeeff 1 restart_on_corruption",
}

func TestPackGolden(t *testing.T) {
	cases := []struct {
		file string
		req  Request
	}{
		{"version.hex", Request{}},
		{"create.hex", Request{Name: "root", UUID: "DROVER-VERITY-root"}},
		{"table_load.hex", Request{Name: "root", Flags: FlagReadOnly, Targets: []Target{verityTarget}}},
		{"resume.hex", Request{Name: "root"}},
	}
	for _, c := range cases {
		t.Run(c.file, func(t *testing.T) {
			b, err := Pack(c.req)
			if err != nil {
				t.Fatal(err)
			}
			golden(t, c.file, b)
		})
	}
}

// TestPackLayout checks the table-load layout field by field against
// dm-ioctl.h, independently of the golden file.
func TestPackLayout(t *testing.T) {
	b, err := Pack(Request{Name: "root", Flags: FlagReadOnly, Targets: []Target{verityTarget, {Start: 2097152, Length: 8, Type: "zero"}}})
	if err != nil {
		t.Fatal(err)
	}
	le := binary.LittleEndian
	if got := [3]uint32{le.Uint32(b[0:]), le.Uint32(b[4:]), le.Uint32(b[8:])}; got != [3]uint32{4, 0, 0} {
		t.Errorf("version = %v", got)
	}
	if le.Uint32(b[12:]) != uint32(len(b)) || le.Uint32(b[16:]) != 312 || le.Uint32(b[20:]) != 2 || le.Uint32(b[28:]) != 1 {
		t.Errorf("data_size %d (len %d), data_start %d, target_count %d, flags %d",
			le.Uint32(b[12:]), len(b), le.Uint32(b[16:]), le.Uint32(b[20:]), le.Uint32(b[28:]))
	}
	if string(b[48:52]) != "root" || b[52] != 0 {
		t.Errorf("name field = %q", b[48:56])
	}
	spec := b[312:]
	next := le.Uint32(spec[20:])
	if le.Uint64(spec[0:]) != 0 || le.Uint64(spec[8:]) != 2097152 || cString(spec[24:40]) != "verity" {
		t.Errorf("first target spec = %x", spec[:40])
	}
	if got := cString(spec[40:next]); got != verityTarget.Params {
		t.Errorf("first params = %q", got)
	}
	if next%8 != 0 || int(next) < 40+len(verityTarget.Params)+1 {
		t.Errorf("next = %d: not 8-aligned or overlapping the params", next)
	}
	second := spec[next:]
	if le.Uint64(second[0:]) != 2097152 || le.Uint64(second[8:]) != 8 || cString(second[24:40]) != "zero" {
		t.Errorf("second target spec = %x", second[:40])
	}
	if len(b)%8 != 0 {
		t.Errorf("request length %d is not 8-aligned", len(b))
	}
}

func TestUnpack(t *testing.T) {
	b, err := Pack(Request{Name: "root", UUID: "u"})
	if err != nil {
		t.Fatal(err)
	}
	// The kernel encodes dev_t 253:300 as new_encode_dev does.
	major, minor := uint64(253), uint64(300)
	binary.LittleEndian.PutUint64(b[40:], (minor&0xff)|(major<<8)|((minor&^0xff)<<12))
	binary.LittleEndian.PutUint32(b[24:], 2)
	h, err := Unpack(b)
	if err != nil {
		t.Fatal(err)
	}
	if h.Major() != 253 || h.Minor() != 300 || h.Name != "root" || h.UUID != "u" || h.OpenCount != 2 {
		t.Errorf("unpacked %+v: major %d minor %d", h, h.Major(), h.Minor())
	}
	if _, err := Unpack(b[:100]); err == nil {
		t.Error("short reply accepted")
	}
}

func TestPackRefuses(t *testing.T) {
	bad := []Request{
		{Name: "a/b"},
		{Name: ".."},
		{Name: strings.Repeat("n", 128)},
		{Name: "root", UUID: strings.Repeat("u", 129)},
		{Name: "root", Flags: FlagBufferFull},
		{Name: "root", Targets: []Target{{Length: 1, Type: "a-type-name-too-long"}}},
		{Name: "root", Targets: []Target{{Length: 0, Type: "zero"}}},
		{Name: "root", Targets: []Target{{Length: 1, Type: "zero", Params: "a\x00b"}}},
		{Targets: []Target{{Length: 1, Type: "zero"}}},
	}
	for _, r := range bad {
		if _, err := Pack(r); err == nil {
			t.Errorf("Pack(%+v) succeeded", r)
		}
	}
}

func TestTargetString(t *testing.T) {
	if got := (Target{Start: 0, Length: 8, Type: "verity", Params: "1 a b"}).String(); got != "0 8 verity 1 a b" {
		t.Errorf("String() = %q", got)
	}
}

// golden compares b with testdata/name, a hex dump of 32 bytes a line, or
// rewrites it under -update.
func golden(t *testing.T, name string, b []byte) {
	t.Helper()
	var sb strings.Builder
	for i := 0; i < len(b); i += 32 {
		sb.WriteString(hex.EncodeToString(b[i:min(i+32, len(b))]))
		sb.WriteByte('\n')
	}
	path := filepath.Join("testdata", name)
	if *update {
		if err := os.WriteFile(path, []byte(sb.String()), 0o644); err != nil {
			t.Fatal(err)
		}
		return
	}
	want, err := os.ReadFile(path)
	if err != nil {
		t.Fatalf("reading golden file (run go test -update to create it): %v", err)
	}
	if !bytes.Equal(want, []byte(sb.String())) {
		t.Errorf("%s differs from the packed request:\n got:\n%s\nwant:\n%s", path, sb.String(), want)
	}
}
