package provider

import (
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"strings"
	"unicode"
)

// Platform is where the agent finds its configuration.
type Platform string

// Platforms Detect can return.
const (
	PlatformUnknown Platform = ""
	PlatformECS     Platform = "ecs"
	PlatformQEMU    Platform = "qemu"
	PlatformFile    Platform = "file"
)

// Kernel arguments and fw_cfg names drover reads.
const (
	// ArgConfig names the user-data file: drover.config=/path (absolute, under the root).
	ArgConfig = "drover.config"
	// ArgFacts optionally names a facts JSON file for the File provider.
	ArgFacts = "drover.facts"
	// FwCfgUserData is the fw_cfg name of the user-data:
	// qemu … -fw_cfg name=opt/drover/userdata,file=config.ign
	FwCfgUserData = "opt/drover/userdata"
	// FwCfgFacts is the fw_cfg name of an optional facts JSON (see Facts).
	FwCfgFacts = "opt/drover/facts"
)

// Paths probed under the root prefix, relative so they join under it.
const (
	dmiProductName = "sys/class/dmi/id/product_name"
	dmiSysVendor   = "sys/class/dmi/id/sys_vendor"
	procCmdline    = "proc/cmdline"
)

// fwCfgPath is where the kernel's qemu_fw_cfg driver exposes the named entry.
func fwCfgPath(name string) string {
	return "sys/firmware/qemu_fw_cfg/by_name/" + name + "/raw"
}

// Probes are the facts about the machine that Detect decides on. ReadProbes fills
// them from a real system; tests write them as literals.
type Probes struct {
	ProductName   string // DMI system product name, trimmed
	SysVendor     string // DMI system vendor, trimmed
	Cmdline       string // kernel command line
	FwCfgUserData bool   // the fw_cfg entry FwCfgUserData exists
}

// ReadProbes gathers Probes under root ("/" on a node). Missing files are normal
// (no DMI in some VMs, no fw_cfg driver) and leave the field empty; other read
// errors are returned joined, with Probes filled as far as possible so the caller
// can log the error and still detect.
func ReadProbes(root string) (Probes, error) {
	var p Probes
	var errs []error
	read := func(rel string) string {
		b, err := os.ReadFile(filepath.Join(root, rel))
		if err != nil {
			if !errors.Is(err, fs.ErrNotExist) {
				errs = append(errs, fmt.Errorf("probing platform: reading /%s: %w", rel, err))
			}
			return ""
		}
		return strings.TrimSpace(string(b))
	}
	p.ProductName = read(dmiProductName)
	p.SysVendor = read(dmiSysVendor)
	p.Cmdline = read(procCmdline)
	switch _, err := os.Stat(filepath.Join(root, fwCfgPath(FwCfgUserData))); {
	case err == nil:
		p.FwCfgUserData = true
	case !errors.Is(err, fs.ErrNotExist):
		errs = append(errs, fmt.Errorf("probing platform: checking fw_cfg %s: %w", FwCfgUserData, err))
	}
	return p, errors.Join(errs...)
}

// Detect chooses the platform; the order and its reasons are in the package doc.
func Detect(p Probes) Platform {
	if path, ok := KernelArg(p.Cmdline, ArgConfig); ok && path != "" {
		return PlatformFile
	}
	if p.FwCfgUserData {
		return PlatformQEMU
	}
	// Every ECS family we know reports this product name; the vendor check keeps
	// detection working if a family reports another product name (unverified).
	if strings.EqualFold(p.ProductName, "Alibaba Cloud ECS") || strings.EqualFold(p.SysVendor, "Alibaba Cloud") {
		return PlatformECS
	}
	return PlatformUnknown
}

// KernelArg returns the value of name=value on the kernel command line. As the
// kernel does, it honours double quotes around values with spaces and lets the
// last occurrence win. A bare "name" yields ("", true).
func KernelArg(cmdline, name string) (string, bool) {
	value, found := "", false
	for _, arg := range splitCmdline(cmdline) {
		k, v, _ := strings.Cut(arg, "=")
		if k == name {
			value, found = v, true
		}
	}
	return value, found
}

// splitCmdline splits on unquoted white space and drops the quotes.
func splitCmdline(s string) []string {
	var args []string
	var cur strings.Builder
	inQuote, inArg := false, false
	for _, r := range s {
		switch {
		case r == '"':
			inQuote = !inQuote
			inArg = true
		case unicode.IsSpace(r) && !inQuote:
			if inArg {
				args = append(args, cur.String())
				cur.Reset()
				inArg = false
			}
		default:
			cur.WriteRune(r)
			inArg = true
		}
	}
	if inArg {
		args = append(args, cur.String())
	}
	return args
}
