// Package network is drover-agent's network phase: wait for the node's primary
// interface to be configured, set the hostname, and put the kernel in the state
// Kubernetes networking needs.
//
// drover does not configure addresses itself: systemd-networkd runs DHCP on the
// node, and this package only waits, bounded, for the result. Each concern has a
// pure half that decides and a thin half that talks to the kernel (STYLE.md §5,
// §6):
//
//   - Decide looks at a Snapshot (links, IPv4 addresses, IPv4 routes as plain
//     values) and says whether the network is ready and which interface is the
//     primary; Wait takes snapshots over netlink, re-checking on every rtnetlink
//     notification and periodically, until Decide says ready or the timeout
//     passes, and then reports what it saw.
//   - NormalizeHostname validates and lower-cases a name (RFC 1123); SetHostname
//     sets it in the kernel and in <root>/etc/hostname.
//   - ModuleLoadOrder resolves kernel modules and their dependencies from the
//     text modules.dep / modules.builtin; Modules.Load loads them with
//     finit_module(2), without modprobe.
//   - Sysctls is the desired sysctl set; ApplySysctls writes it under
//     <root>/proc/sys.
//
// Run strings the four together the way the agent's network phase uses them.
// Every file path is taken under a root prefix, so tests run against a
// temporary directory; all progress goes to an injected Logf.
package network
