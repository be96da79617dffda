// Package provider is where drover-agent's configuration (the user-data) and the
// instance facts (instance id, region, zone, type, address) come from.
//
// Three providers implement Provider:
//
//   - ECSClient talks to the Alibaba Cloud ECS instance metadata service at
//     http://100.100.100.200 in hardened mode (PUT /latest/api/token, then GETs
//     carrying the token), falling back to tokenless requests on an old service
//     without the token endpoint. Requests are retried with jittered exponential
//     backoff until a per-call deadline, because early in boot the service is
//     unreachable until DHCP has configured the primary NIC, and it is
//     rate-limited. Every attempt is logged as one line.
//   - QEMU reads the fw_cfg entry opt/drover/userdata (and optionally
//     opt/drover/facts) through sysfs; the harness attaches it with
//     `-fw_cfg name=opt/drover/userdata,file=config.ign`.
//   - File reads a path named on the kernel command line, `drover.config=/path`
//     (and optionally facts from `drover.facts=/path`).
//
// Detect picks the platform from probes gathered by ReadProbes, in this order:
//
//  1. `drover.config=` on the kernel command line → File. An explicit operator
//     choice wins over anything inferred from the hardware, so a local config can
//     be used on any platform (debugging, air-gapped tests).
//  2. The fw_cfg entry opt/drover/userdata exists → QEMU. It exists only when
//     someone deliberately attached drover user-data to this VM; it is more
//     specific than DMI, which a harness may set to look like ECS.
//  3. DMI product name "Alibaba Cloud ECS" (or, tolerantly, system vendor
//     "Alibaba Cloud") → ECS.
//  4. Otherwise Unknown: Open reports what was looked for and how to fix it.
//
// User-data from every provider is returned exactly as given, within a limit on
// its size as given (32 KiB on ECS). A launch template may carry a gzip-compressed
// Ignition config, but gzip is undone in one place only, ignition.Parse, which
// drover validate runs too: a provider that decompressed as well would make the
// node accept what validate refuses (gzip inside gzip), and the agent stores the
// user-data as the metadata gave it.
// Facts from QEMU and File are whatever their JSON supplies and may be partial;
// ECS facts always carry the instance and region ids. Paths are resolved under a
// root prefix so tests run against a temporary directory.
package provider

import (
	"context"
	"fmt"
)

// Provider supplies the user-data and the facts of the instance the agent runs on.
type Provider interface {
	// Name is a short label for logs and the status file: "ecs", "qemu", "file".
	Name() string
	// UserData returns the user-data as the platform gives it (not decompressed);
	// present is false when the platform has none, which is not an error.
	UserData(ctx context.Context) (data []byte, present bool, err error)
	// Facts describes the instance; fields the platform does not know are empty.
	Facts(ctx context.Context) (Facts, error)
}

// Facts describe the instance. The JSON names are the metadata keys, which is
// also the format of the QEMU and File facts files.
type Facts struct {
	InstanceID   string `json:"instance-id,omitempty"`
	RegionID     string `json:"region-id,omitempty"`
	ZoneID       string `json:"zone-id,omitempty"`
	InstanceType string `json:"instance-type,omitempty"`
	Hostname     string `json:"hostname,omitempty"`
	PrivateIPv4  string `json:"private-ipv4,omitempty"`
	MAC          string `json:"mac,omitempty"`
	// NTPServers are the platform's time servers (ECS ntp-conf/ntp-servers),
	// blank-separated host names or addresses (see ParseNTPServers); empty
	// when the platform names none, which is not an error.
	NTPServers string `json:"ntp-servers,omitempty"`
}

// ProviderID is the Kubernetes node providerID the Alibaba cloud-controller-manager
// expects, "<region-id>.<instance-id>"; empty unless both are known.
func (f Facts) ProviderID() string {
	if f.RegionID == "" || f.InstanceID == "" {
		return ""
	}
	return f.RegionID + "." + f.InstanceID
}

// Open returns the provider for platform pl. root is the filesystem prefix the
// QEMU and File providers read under ("/" on a node); p supplies the kernel
// command line for File. ecs is the client used for ECS; nil means defaults.
func Open(pl Platform, root string, p Probes, ecs *ECSClient) (Provider, error) {
	switch pl {
	case PlatformECS:
		if ecs == nil {
			ecs = &ECSClient{}
		}
		return ecs, nil
	case PlatformQEMU:
		return &QEMU{Root: root}, nil
	case PlatformFile:
		config, _ := KernelArg(p.Cmdline, ArgConfig)
		facts, _ := KernelArg(p.Cmdline, ArgFacts)
		return &File{Root: root, Path: config, FactsPath: facts}, nil
	}
	return nil, fmt.Errorf("choosing a configuration provider: platform not recognised "+
		"(DMI product name %q, vendor %q; no %s= kernel argument; no QEMU fw_cfg %s): "+
		"run on Alibaba Cloud ECS, attach user-data with -fw_cfg name=%s,file=…, "+
		"or boot with %s=/path/to/config.ign",
		p.ProductName, p.SysVendor, ArgConfig, FwCfgUserData, FwCfgUserData, ArgConfig)
}
