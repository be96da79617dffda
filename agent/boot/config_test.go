package boot

import (
	"bytes"
	"encoding/hex"
	"os"
	"strings"
	"testing"

	"github.com/drover-os/drover/image/verity"
)

func testConfig(t *testing.T) *Config {
	t.Helper()
	b, err := os.ReadFile("testdata/config.json")
	if err != nil {
		t.Fatal(err)
	}
	c, err := Parse(b)
	if err != nil {
		t.Fatal(err)
	}
	return c
}

func TestConfigRoundTrip(t *testing.T) {
	want, err := os.ReadFile("testdata/config.json")
	if err != nil {
		t.Fatal(err)
	}
	c := testConfig(t)
	got, err := c.Marshal()
	if err != nil {
		t.Fatal(err)
	}
	if !bytes.Equal(got, want) {
		t.Errorf("Marshal(Parse(x)) != x:\n%s", got)
	}
	if c.Verity.DataBlocks != 262144 || len(c.Modules) != 7 || c.VarLabel != "var" {
		t.Errorf("parsed %+v", c)
	}
}

func TestConfigPartUUIDsFollowRootHash(t *testing.T) {
	// The example's UUIDs must be the ones the verity package derives, or
	// the example itself (and the check) would be wrong.
	c := testConfig(t)
	h, _ := hex.DecodeString(c.RootHash)
	root, ver := verity.PartitionUUIDs(h)
	if verity.FormatGUID(root) != c.RootPartUUID || verity.FormatGUID(ver) != c.VerityPartUUID {
		t.Errorf("example config UUIDs %s %s, derived %s %s", c.RootPartUUID, c.VerityPartUUID, verity.FormatGUID(root), verity.FormatGUID(ver))
	}
}

func TestConfigValidate(t *testing.T) {
	cases := map[string]struct {
		edit func(c *Config)
		want string
	}{
		"kernel path":        {func(c *Config) { c.Kernel = "../6.1" }, "kernel"},
		"absolute module":    {func(c *Config) { c.Modules = []string{"/lib/x.ko"} }, "relative"},
		"dotdot module":      {func(c *Config) { c.Modules = []string{"../x.ko"} }, "relative"},
		"zstd module":        {func(c *Config) { c.Modules = []string{"x.ko.zst"} }, ".ko.xz"},
		"short root hash":    {func(c *Config) { c.RootHash = "abcd" }, "rootHash"},
		"algorithm":          {func(c *Config) { c.Verity.Algorithm = "sha1" }, "algorithm"},
		"block size":         {func(c *Config) { c.Verity.DataBlockSize = 3000 }, "block size"},
		"hash start":         {func(c *Config) { c.Verity.HashStartBlock = 0 }, "hashStartBlock"},
		"no blocks":          {func(c *Config) { c.Verity.DataBlocks = 0 }, "dataBlocks"},
		"salt":               {func(c *Config) { c.Verity.Salt = "xyz" }, "salt"},
		"root uuid":          {func(c *Config) { c.RootPartUUID = c.VerityPartUUID }, "root hash gives"},
		"verity uuid form":   {func(c *Config) { c.VerityPartUUID = "b2d7f0c1e3b5a7c9d1f3e5a7b9c1d3e5" }, "GUID"},
		"var type":           {func(c *Config) { c.VarPartType = "var" }, "varPartType"},
		"long label":         {func(c *Config) { c.VarLabel = strings.Repeat("v", 37) }, "varLabel"},
		"empty label":        {func(c *Config) { c.VarLabel = "" }, "varLabel"},
		"relative readahead": {func(c *Config) { c.ReadAhead = []string{"usr/bin/drover-agent"} }, "readAhead"},
		"dotdot readahead":   {func(c *Config) { c.ReadAhead = []string{"/usr/../etc/shadow"} }, "readAhead"},
		"no cmdline":         {func(c *Config) { c.Cmdline = "" }, "cmdline"},
		"other root hash":    {func(c *Config) { c.Cmdline = "drover.roothash=" + strings.Repeat("0", 64) }, "cmdline"},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			c := testConfig(t)
			tc.edit(c)
			err := c.Validate()
			if err == nil || !strings.Contains(err.Error(), tc.want) {
				t.Errorf("Validate() = %v, want an error mentioning %q", err, tc.want)
			}
			if _, err := c.Marshal(); err == nil {
				t.Error("Marshal accepted an invalid config")
			}
		})
	}
}

func TestParseRefuses(t *testing.T) {
	for _, in := range []string{`{`, `{"kernel":"6.1","extra":1}`, `[]`} {
		if _, err := Parse([]byte(in)); err == nil {
			t.Errorf("Parse(%s) succeeded", in)
		}
	}
}

func TestVerityTarget(t *testing.T) {
	c := testConfig(t)
	data := BlockDevice{Name: "vda2", Major: 254, Minor: 2}
	hash := BlockDevice{Name: "vda3", Major: 254, Minor: 3}
	tg, err := VerityTarget(c, data, hash, corruptionPolicy)
	if err != nil {
		t.Fatal(err)
	}
	want := "0 2097152 verity 1 254:2 254:3 4096 4096 262144 1 sha256 " + c.RootHash + " " + c.Verity.Salt + " 1 restart_on_corruption"
	if tg.String() != want {
		t.Errorf("target\n got %s\nwant %s", tg, want)
	}
	c.Verity.Salt = ""
	tg, err = VerityTarget(c, data, hash)
	if err != nil {
		t.Fatal(err)
	}
	if !strings.HasSuffix(tg.Params, c.RootHash+" -") {
		t.Errorf("unsalted params %q should end in the kernel's '-' for no salt", tg.Params)
	}
}
