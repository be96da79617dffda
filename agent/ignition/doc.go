// Package ignition reads the Ignition config a drover node receives as
// user-data, refuses what an immutable node cannot honour, and applies the
// rest to the node's two writable trees: the tmpfs /etc, rebuilt from the
// image at every boot, and the persistent /var.
//
// The path from user-data to disk is split so that everything but the last
// step is pure and printable:
//
//	Parse    raw or gzip user-data of any stable spec (3.0.0 to 3.5.0),
//	         translated up to 3.5.0 by github.com/coreos/ignition/v2/config,
//	         then the drover policy; data: URLs are decoded and verified
//	Resolve  http(s) contents fetched through a Fetcher (once: the agent
//	         keeps them by hash in a ContentCache) and checked against
//	         their verification.hash
//	Plan     ordered, printable steps and the list of managed paths
//	Apply    the steps under a root prefix, atomically per file, undone
//	         as a whole if any step fails
//
// The policy is an allowlist (extpoints.go): one table of the extension
// points user-data may write, what each is for and what is checked in it;
// everything else is "not an extension point of the node". Inside it the
// checks read what is written: the drop-ins of kubelet.service and
// containerd.service against a directive allowlist (dropinallow.go), every
// unit for lifecycle dependencies on the node's own units (unitdeps.go),
// sysctl.d keys against the node's security set (sysctl.go).
//
// The policy also includes the node's protected surface (protected.go): what
// user-data may not write, replace or link to because the node's
// guarantees rest on it. It follows systemd's own rules rather than a
// list of paths: every unit search directory, drop-in directories by
// dash prefix, template and type, aliases made by links (unitpaths.go);
// unit files read as systemd reads them, CR line endings and
// continuations included (unitconf.go); paths through the node's links
// such as /var/run -> /run (nodepaths.go); and tmpfiles.d lines, which
// the agent has run as root after apply (tmpfiles.go).
//
// Validate runs the same code as the agent's Prepare (Parse, Resolve,
// Extra checks), so drover validate on a build host and drover-agent on the
// node refuse a config with identical problem lines.
//
// Semantics that differ from Ignition's, because the config is re-applied
// at every boot onto a fresh /etc and the surviving /var:
//   - a file with contents replaces an existing regular file whatever its
//     overwrite flag says (the image's /etc files are defaults); overwrite
//     is needed only to replace a link or another non-regular node;
//   - a link that already points where it should is left alone, and a
//     symbolic link pointing elsewhere is replaced;
//   - appending to a /var file without contents is refused, as the
//     fragment would be appended again at every boot;
//   - enabling a unit creates the links `systemctl enable` would, from the
//     unit's [Install] WantedBy= and RequiredBy= (multi-user.target when the
//     unit comes from the image or has no [Install] section);
//   - unknown keys are refused rather than ignored.
package ignition
