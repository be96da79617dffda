package boot

import (
	"bytes"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"math/bits"
	"path"
	"strings"
	"unicode/utf16"

	"github.com/drover-os/drover/image/verity"
)

// ConfigPath is where the builder puts the Config inside the initrd.
const ConfigPath = "/etc/drover-init.json"

// VarPartTypeX86_64 is the Discoverable Partitions Specification type of a
// /var partition ("SD_GPT_VAR"); the type is the same on every architecture.
const VarPartTypeX86_64 = "4d21b016-b534-45c2-a9fb-5c16e091fd2d"

// Config is everything the builder tells drover-init about its image,
// written as JSON at ConfigPath in the initrd.
type Config struct {
	Kernel         string       `json:"kernel"`  // the kernel release: modules live in /lib/modules/<Kernel>
	Modules        []string     `json:"modules"` // module files relative to /lib/modules/<Kernel>, in load order
	RootHash       string       `json:"rootHash"`
	Verity         VerityConfig `json:"verity"`
	RootPartUUID   string       `json:"rootPartUUID"`
	VerityPartUUID string       `json:"verityPartUUID"`
	VarPartType    string       `json:"varPartType"`
	VarLabel       string       `json:"varLabel"`
	// ReadAhead are files of the root (absolute paths) whose reads
	// drover-init starts before it hands over to systemd: the first
	// service that runs, drover-agent, then finds its binary in the page
	// cache instead of faulting it in through dm-verity while systemd's
	// early units compete for the CPU.
	ReadAhead []string `json:"readAhead,omitempty"`
	// Cmdline is the UKI's .cmdline as signed: under Secure Boot, or
	// whenever SignedUKI is set, drover-init refuses a /proc/cmdline with
	// other words (see CompareCmdline). It must carry
	// drover.roothash=RootHash.
	Cmdline string `json:"cmdline"`
	// SignedUKI says the builder signed the UKI this initrd is part of
	// for Secure Boot (the signature covers this file). drover-init then
	// refuses any other command line whatever it reads of Secure Boot:
	// whoever appends words can also append ones that hide the Secure
	// Boot state (noefi), and an unreadable state is not "off".
	SignedUKI bool `json:"signedUKI,omitempty"`
}

// VerityConfig holds the dm-verity parameters of the root, as
// verity.Result reports them at build time.
type VerityConfig struct {
	DataBlocks     uint64 `json:"dataBlocks"`
	DataBlockSize  uint32 `json:"dataBlockSize"`
	HashBlockSize  uint32 `json:"hashBlockSize"`
	HashStartBlock uint64 `json:"hashStartBlock"`
	Salt           string `json:"salt"`
	Algorithm      string `json:"algorithm"`
}

// Marshal returns the config as indented JSON with a trailing newline. The
// output depends only on c, so the initrd stays reproducible.
func (c *Config) Marshal() ([]byte, error) {
	if err := c.Validate(); err != nil {
		return nil, err
	}
	b, err := json.MarshalIndent(c, "", "  ")
	if err != nil {
		return nil, fmt.Errorf("encoding drover-init config: %w", err)
	}
	return append(b, '\n'), nil
}

// Parse decodes and validates a config. Unknown fields are refused: the
// builder and drover-init ship in the same image, so an unknown field means
// a mismatched initrd, not an older one.
func Parse(b []byte) (*Config, error) {
	dec := json.NewDecoder(bytes.NewReader(b))
	dec.DisallowUnknownFields()
	var c Config
	if err := dec.Decode(&c); err != nil {
		return nil, fmt.Errorf("parsing drover-init config: %w (rebuild the image: the initrd's config is damaged or from another drover version)", err)
	}
	if err := c.Validate(); err != nil {
		return nil, err
	}
	return &c, nil
}

// Validate checks every field and that the partition UUIDs are the ones the
// root hash gives, so a config that could not boot is refused by the
// builder instead of on the node.
func (c *Config) Validate() error {
	fail := func(format string, a ...any) error {
		return fmt.Errorf("drover-init config: "+format, a...)
	}
	if c.Kernel == "" || strings.ContainsAny(c.Kernel, "/ \x00") || c.Kernel == "." || c.Kernel == ".." {
		return fail("kernel %q is not a kernel release (like 6.12.48+deb13-amd64)", c.Kernel)
	}
	for _, m := range c.Modules {
		if m == "" || path.IsAbs(m) || path.Clean(m) != m || strings.HasPrefix(m, "../") {
			return fail("module path %q must be relative to /lib/modules/%s and clean", m, c.Kernel)
		}
		if !strings.HasSuffix(m, ".ko") && !strings.HasSuffix(m, ".ko.xz") {
			return fail("module %q: only .ko and .ko.xz files can be loaded", m)
		}
	}
	for _, p := range c.ReadAhead {
		if !path.IsAbs(p) || path.Clean(p) != p || p == "/" {
			return fail("readAhead path %q must be an absolute, clean path of a file in the root", p)
		}
	}
	rootHash, err := hex.DecodeString(c.RootHash)
	if err != nil || len(rootHash) != 32 {
		return fail("rootHash %q is not 64 hex digits (a sha256 root hash)", c.RootHash)
	}
	v := c.Verity
	if v.Algorithm != verity.Algorithm {
		return fail("verity algorithm %q is not supported: only %s", v.Algorithm, verity.Algorithm)
	}
	if v.DataBlocks == 0 {
		return fail("verity dataBlocks is zero")
	}
	for _, bs := range []uint32{v.DataBlockSize, v.HashBlockSize} {
		if bs < 512 || bs > 512*1024 || bits.OnesCount32(bs) != 1 {
			return fail("verity block size %d is not a power of two from 512 to 524288", bs)
		}
	}
	if v.HashStartBlock != 1 {
		// verity.Table places the tree after the superblock at block 1.
		return fail("verity hashStartBlock is %d: drover images keep the superblock at block 0 and the tree at block 1", v.HashStartBlock)
	}
	if salt, err := hex.DecodeString(v.Salt); err != nil || len(salt) > 256 {
		return fail("verity salt %q is not up to 256 bytes of hex", v.Salt)
	}
	rootUUID, verityUUID := verity.PartitionUUIDs(rootHash)
	for _, p := range []struct{ name, got, want string }{
		{"rootPartUUID", c.RootPartUUID, verity.FormatGUID(rootUUID)},
		{"verityPartUUID", c.VerityPartUUID, verity.FormatGUID(verityUUID)},
	} {
		if _, err := ParseGUID(p.got); err != nil {
			return fail("%s: %w", p.name, err)
		}
		if !strings.EqualFold(p.got, p.want) {
			return fail("%s is %s but the root hash gives %s", p.name, p.got, p.want)
		}
	}
	if cl := ParseCmdline(c.Cmdline); !strings.EqualFold(cl.RootHash, c.RootHash) {
		return fail("cmdline %q must carry drover.roothash=%s: it is the UKI's signed .cmdline", c.Cmdline, c.RootHash)
	}
	if _, err := ParseGUID(c.VarPartType); err != nil {
		return fail("varPartType: %w", err)
	}
	if c.VarLabel == "" || len(utf16.Encode([]rune(c.VarLabel))) > 36 {
		return fail("varLabel %q must be 1 to 36 UTF-16 characters (the GPT name field)", c.VarLabel)
	}
	return nil
}

// VerityResult returns the verity parameters as the verity package
// describes them, for verity.Table.
func (c *Config) VerityResult() (*verity.Result, error) {
	rootHash, err := hex.DecodeString(c.RootHash)
	if err != nil {
		return nil, fmt.Errorf("decoding root hash %q: %w", c.RootHash, err)
	}
	salt, err := hex.DecodeString(c.Verity.Salt)
	if err != nil {
		return nil, fmt.Errorf("decoding verity salt %q: %w", c.Verity.Salt, err)
	}
	return &verity.Result{
		RootHash:      rootHash,
		DataBlocks:    c.Verity.DataBlocks,
		DataBlockSize: c.Verity.DataBlockSize,
		HashBlockSize: c.Verity.HashBlockSize,
		Salt:          salt,
	}, nil
}

// ParseGUID parses the canonical 8-4-4-4-12 form into its 16 bytes in
// string order (the order verity.FormatGUID prints).
func ParseGUID(s string) ([16]byte, error) {
	var u [16]byte
	if len(s) != 36 || s[8] != '-' || s[13] != '-' || s[18] != '-' || s[23] != '-' {
		return u, fmt.Errorf("%q is not a GUID in 8-4-4-4-12 form", s)
	}
	h := s[0:8] + s[9:13] + s[14:18] + s[19:23] + s[24:36]
	if _, err := hex.Decode(u[:], []byte(h)); err != nil {
		return u, fmt.Errorf("%q is not a GUID: %w", s, err)
	}
	return u, nil
}
