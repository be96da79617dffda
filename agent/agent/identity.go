package agent

import (
	"bufio"
	"bytes"
	"fmt"
	"os"
	"strings"

	"github.com/drover-os/drover/agent/nodeconfig"
	"github.com/drover-os/drover/internal/atomicfile"
	"github.com/drover-os/drover/nodecontract"
)

// A rollout (drover rollout) must tell, from the API server alone, whether a
// Node runs the image and the node configuration the scaling group's launch
// template now carries. The agent labels its Node with both at
// registration: the image's build ID and the digest of the user-data the
// instance was launched with (nodecontract.ConfigDigest).

// ConfigStateFile keeps nodecontract.ConfigDigest of the user-data the instance was
// launched with, written on the first boot: later boots hold only the
// redacted config, from which the digest can no longer be computed.
const ConfigStateFile = StateDir + "/node-config.sha256"

// recordConfigDigest writes ConfigStateFile on the first boot.
func (a *Agent) recordConfigDigest() error {
	if fileExists(a.path(ConfigStateFile)) {
		return nil
	}
	d, err := nodecontract.ConfigDigest(a.userData)
	if err != nil {
		return fmt.Errorf("digest of the user-data for the %s label: %w", nodeconfig.LabelNodeConfig, err)
	}
	return atomicfile.Write(a.path(ConfigStateFile), []byte(d+"\n"), 0o644)
}

// configDigestLabel is the node-config label value, "" when unknown (an
// instance first booted by an agent without it).
func (a *Agent) configDigestLabel() string {
	b, err := os.ReadFile(a.path(ConfigStateFile))
	if err != nil {
		return ""
	}
	return nodecontract.ConfigLabel(strings.TrimSpace(string(b)))
}

// buildID is the image's BUILD_ID from os-release on the read-only root,
// "" when it has none.
func (a *Agent) buildID() string {
	b, err := os.ReadFile(a.path("/usr/lib/os-release"))
	if err != nil {
		return ""
	}
	sc := bufio.NewScanner(bytes.NewReader(b))
	for sc.Scan() {
		if v, ok := strings.CutPrefix(sc.Text(), "BUILD_ID="); ok {
			return strings.Trim(v, `"'`)
		}
	}
	return ""
}
