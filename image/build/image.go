package build

import (
	"crypto/sha256"
	"fmt"
	"os"
	"slices"
	"strings"

	"github.com/drover-os/drover/image/finalize"
	"github.com/drover-os/drover/image/gpt"
	"github.com/drover-os/drover/image/kmod"
	"github.com/drover-os/drover/image/tree"
	"github.com/drover-os/drover/image/uki"
	"github.com/drover-os/drover/image/verity"
)

// diskResult is what the image stage produced.
type diskResult struct {
	RawPath  string
	Size     int64
	RootHash string
	Cmdline  string
	Layout   *gpt.Layout
	RootSize int64
	HashSize int64
	ESPSize  int64
	Initrd   []string // modules in the initrd, in load order
}

func (b *builder) takeBootFiles(kver string) error {
	k := b.tree.Get("/boot/vmlinuz-" + kver)
	if k == nil {
		return fmt.Errorf("kernel image /boot/vmlinuz-%s not in the tree: check the recipe's kernel package", kver)
	}
	var boot [2][]byte
	for i, p := range []string{b.arch.SystemdBoot(), b.arch.Stub()} {
		n := b.tree.Get(p)
		if n == nil || n.Kind != tree.Regular {
			return fmt.Errorf("%s not in the tree: add systemd-boot-efi to the recipe's packages and run drover lock", p)
		}
		if err := uki.CheckMachine(n.Data, b.arch.PE); err != nil {
			return fmt.Errorf("%s: %w", p, err)
		}
		boot[i] = n.Data
	}
	b.kernel, b.systemdBoot, b.stub = k.Data, boot[0], boot[1]
	return nil
}

// NoCredentialImport turns off systemd's import of system credentials at
// PID 1's start (systemd >= 254): from SMBIOS Type 11
// io.systemd.credential[.binary]: strings and QEMU fw_cfg
// opt/io.systemd.credentials/, which whoever runs the hypervisor sets
// without touching the signed command line (tmpfiles.extra, sysctl.extra,
// network.* would configure the node), from systemd.set_credential= words,
// and from the initrd's /.extra/credentials/ (systemd-stub's unsigned
// *.cred files of the ESP). drover passes nothing through credentials:
// the user-data is the agent's own (ECS metadata, fw_cfg opt/drover/).
const NoCredentialImport = "systemd.import_credentials=no"

// KernelCmdline is the UKI's .cmdline: the recipe's words, then drover's
// own. NoCredentialImport comes after the recipe's (the last
// systemd.import_credentials= counts) and drover.roothash= last.
func KernelCmdline(recipeWords []string, rootHash string) string {
	return strings.Join(append(slices.Clone(recipeWords), NoCredentialImport, "drover.roothash="+rootHash), " ")
}

// derive16 makes a deterministic 16-byte value (UUIDs, volume ids) from the
// build's content, tagged by purpose, with RFC 4122 version 4 bits so tools
// that check them are content.
func derive16(purpose, seed string) [16]byte {
	s := sha256.Sum256([]byte("drover " + purpose + "\x00" + seed))
	var u [16]byte
	copy(u[:], s[:16])
	u[6] = u[6]&0x0f | 0x40
	u[8] = u[8]&0x3f | 0x80
	return u
}

func guid(u [16]byte) string { return verity.FormatGUID(u) }

func copyAt(dst *os.File, off int64, src *os.File, n int64) error {
	buf := make([]byte, 4<<20)
	for done := int64(0); done < n; {
		k := int64(len(buf))
		if n-done < k {
			k = n - done
		}
		if _, err := src.ReadAt(buf[:k], done); err != nil {
			return err
		}
		if _, err := dst.WriteAt(buf[:k], off+done); err != nil {
			return err
		}
		done += k
	}
	return nil
}

// kmodStep builds the module index the kernel package's postinst (depmod)
// would have, and keeps it for choosing the initrd's modules.
type kmodStep struct {
	kver  string
	index **kmod.Index
	cache kmod.Cache // the modules' parsed contents, by content
}

func (kmodStep) String() string { return "kmod-index" }
func (kmodStep) Why() string {
	return "depmod would run in the kernel's postinst; modprobe and kernel auto-loading need modules.dep/alias"
}

func (s kmodStep) Run(t *tree.Tree, env *finalize.Env) error {
	base := "/usr/lib/modules/" + s.kver + "/"
	files := map[string][]byte{}
	for _, p := range t.Paths() {
		if strings.HasPrefix(p, base) && (strings.Contains(p, ".ko")) && t.Get(p).Kind == tree.Regular {
			files[strings.TrimPrefix(p, base)] = t.Get(p).Data
		}
	}
	var builtin, builtinInfo []byte
	if n := t.Get(base + "modules.builtin"); n != nil {
		builtin = n.Data
	}
	if n := t.Get(base + "modules.builtin.modinfo"); n != nil {
		builtinInfo = n.Data
	}
	idx, err := kmod.BuildCached(files, builtin, builtinInfo, 2, s.cache)
	if err != nil {
		return err
	}
	for name, data := range idx.Files() {
		if err := t.Set(&tree.Node{Path: base + name, Kind: tree.Regular, Mode: 0o644, Data: data, Owner: "drover"}); err != nil {
			return err
		}
	}
	*s.index = idx
	return nil
}
