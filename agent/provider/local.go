package provider

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path/filepath"
)

// Size limits of the user-data as given. ECS caps user-data at 32 KiB; fw_cfg
// and files have no such cap, but a config larger than a few MiB is a mistake,
// not a configuration. Decompressed sizes are ignition.Parse's to bound.
const (
	maxLocalUserData = 4 << 20
	maxFactsFile     = 64 << 10
)

// QEMU reads user-data and facts from QEMU fw_cfg entries exposed by the kernel's
// qemu_fw_cfg driver under <Root>/sys/firmware/qemu_fw_cfg/by_name/. Attach them with
//
//	-fw_cfg name=opt/drover/userdata,file=config.ign
//	-fw_cfg name=opt/drover/facts,file=facts.json   (optional, JSON of Facts)
//
// Facts are empty without the facts entry, and partial if it is.
type QEMU struct {
	Root string // filesystem prefix; "" means "/"
}

// Name implements Provider.
func (q *QEMU) Name() string { return "qemu" }

// UserData implements Provider; a missing or empty entry is not present.
func (q *QEMU) UserData(ctx context.Context) ([]byte, bool, error) {
	if err := ctx.Err(); err != nil {
		return nil, false, err
	}
	raw, err := readLimited(filepath.Join(rootOr(q.Root), fwCfgPath(FwCfgUserData)), maxLocalUserData)
	if errors.Is(err, fs.ErrNotExist) {
		return nil, false, nil
	}
	if err != nil {
		return nil, false, fmt.Errorf("reading QEMU fw_cfg %s: %w", FwCfgUserData, err)
	}
	if len(raw) == 0 {
		return nil, false, nil
	}
	return raw, true, nil
}

// Facts implements Provider from the optional fw_cfg entry opt/drover/facts.
func (q *QEMU) Facts(ctx context.Context) (Facts, error) {
	if err := ctx.Err(); err != nil {
		return Facts{}, err
	}
	raw, err := readLimited(filepath.Join(rootOr(q.Root), fwCfgPath(FwCfgFacts)), maxFactsFile)
	if errors.Is(err, fs.ErrNotExist) {
		return Facts{}, nil
	}
	if err != nil {
		return Facts{}, fmt.Errorf("reading QEMU fw_cfg %s: %w", FwCfgFacts, err)
	}
	f, err := parseFacts(raw)
	if err != nil {
		return Facts{}, fmt.Errorf("reading QEMU fw_cfg %s: %w", FwCfgFacts, err)
	}
	return f, nil
}

// File reads user-data from the file named by drover.config= on the kernel
// command line, and facts from the optional drover.facts= JSON. Both paths are
// absolute in the node's filesystem and resolved under Root. The operator asked
// for these files, so a missing one is an error, not "no user-data".
type File struct {
	Root      string // filesystem prefix; "" means "/"
	Path      string // value of drover.config=
	FactsPath string // value of drover.facts=; "" = no facts
}

// Name implements Provider.
func (f *File) Name() string { return "file" }

// UserData implements Provider; an empty file is not present.
func (f *File) UserData(ctx context.Context) ([]byte, bool, error) {
	if err := ctx.Err(); err != nil {
		return nil, false, err
	}
	full, err := resolve(f.Root, ArgConfig, f.Path)
	if err != nil {
		return nil, false, err
	}
	raw, err := readLimited(full, maxLocalUserData)
	if err != nil {
		return nil, false, fmt.Errorf("reading user-data %s=%s: %w: fix the path on the kernel command line",
			ArgConfig, f.Path, err)
	}
	if len(raw) == 0 {
		return nil, false, nil
	}
	return raw, true, nil
}

// Facts implements Provider; without drover.facts= they are empty.
func (f *File) Facts(ctx context.Context) (Facts, error) {
	if err := ctx.Err(); err != nil {
		return Facts{}, err
	}
	if f.FactsPath == "" {
		return Facts{}, nil
	}
	full, err := resolve(f.Root, ArgFacts, f.FactsPath)
	if err != nil {
		return Facts{}, err
	}
	raw, err := readLimited(full, maxFactsFile)
	if err != nil {
		return Facts{}, fmt.Errorf("reading facts %s=%s: %w: fix the path on the kernel command line",
			ArgFacts, f.FactsPath, err)
	}
	facts, err := parseFacts(raw)
	if err != nil {
		return Facts{}, fmt.Errorf("reading facts %s=%s: %w", ArgFacts, f.FactsPath, err)
	}
	return facts, nil
}

func rootOr(root string) string {
	if root == "" {
		return "/"
	}
	return root
}

// resolve places an absolute node path under root; Clean of an absolute path
// drops leading "..", so the result cannot climb out of root lexically.
func resolve(root, arg, p string) (string, error) {
	if !filepath.IsAbs(p) {
		return "", fmt.Errorf("resolving %s=%q: the path must be absolute: fix the kernel command line", arg, p)
	}
	return filepath.Join(rootOr(root), filepath.Clean(p)), nil
}

// readLimited reads a whole file, refusing one larger than limit. It reads to EOF
// rather than trusting the size, which sysfs files report as 0 or a page.
func readLimited(path string, limit int64) ([]byte, error) {
	f, err := os.Open(path)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	b, err := io.ReadAll(io.LimitReader(f, limit+1))
	if err != nil {
		return nil, err
	}
	if int64(len(b)) > limit {
		return nil, fmt.Errorf("%s is larger than %d bytes", path, limit)
	}
	return b, nil
}

// parseFacts decodes the facts JSON. Unknown keys are refused so that a typo
// ("instance_id") fails loudly instead of leaving a fact empty.
func parseFacts(b []byte) (Facts, error) {
	var f Facts
	dec := json.NewDecoder(bytes.NewReader(b))
	dec.DisallowUnknownFields()
	if err := dec.Decode(&f); err != nil {
		return Facts{}, fmt.Errorf("parsing facts JSON (keys: instance-id, region-id, zone-id, "+
			"instance-type, hostname, private-ipv4, mac, ntp-servers): %w", err)
	}
	return f, nil
}
