// Package units holds the systemd units drover adds to every image: the
// agent's own service and the kubelet's (the kubelet is built from the Go
// module proxy, so no Debian package ships a unit for it). The agent starts
// the kubelet itself, so kubelet.service has no [Install] section.
package units

import "embed"

// FS holds *.service.
//
//go:embed *.service
var FS embed.FS

// Dir is where the units are installed in the image.
const Dir = "/usr/lib/systemd/system"
