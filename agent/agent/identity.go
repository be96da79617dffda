package agent

import (
	"bufio"
	"bytes"
	"fmt"
	"os"
	"strings"

	"github.com/drover-os/drover/agent/ignition"
	"github.com/drover-os/drover/agent/nodeconfig"
	"github.com/drover-os/drover/internal/atomicfile"
)

// A rollout (drover rollout) must tell, from the API server alone, whether a
// Node runs the image and the node configuration the scaling group's launch
// template now carries. The agent labels its Node with both at
// registration: the image's build ID and the digest of the user-data the
// instance was launched with, bootstrap token excluded, so that rotating
// the token (a new template version for new instances) replaces no node.

// ConfigStateFile keeps ConfigDigest of the user-data the instance was
// launched with, written on the first boot: later boots hold only the
// redacted config, from which the digest can no longer be computed.
const ConfigStateFile = StateDir + "/node-config.sha256"

// TokenPlaceholder stands for the bootstrap token in ConfigDigest.
const TokenPlaceholder = "<bootstrap-token>"

// ConfigDigest is the sha256 (hex) of the user-data with its node file's
// bootstrap token, whole (id and secret), replaced by TokenPlaceholder.
// drover rollout computes it from the user-data it puts in a launch
// template; the agent from the user-data it received: the same bytes give
// the same digest.
func ConfigDigest(userData []byte) (string, error) {
	cfg, err := ignition.Parse(userData)
	if err != nil {
		return "", fmt.Errorf("the user-data is not an Ignition config the agent accepts: %w", err)
	}
	token := ""
	if nf, ok := cfg.File(NodeFile); ok {
		c, err := nodeconfig.Parse(nf, NodeFile)
		if err != nil {
			return "", err
		}
		token = c.Cluster.BootstrapToken
	}
	if token == "" {
		return digest(userData), nil
	}
	red, err := ignition.Redact(userData, token, TokenPlaceholder, nil)
	if err != nil {
		return "", err
	}
	return digest(red.Config), nil
}

// configLabel is the value of nodeconfig.LabelNodeConfig: a label value is
// at most 63 characters, and 40 hex digits (160 bits) tell configurations
// apart as well as a commit ID does.
func configLabel(d string) string {
	if len(d) < 40 {
		return ""
	}
	return d[:40]
}

// recordConfigDigest writes ConfigStateFile on the first boot.
func (a *Agent) recordConfigDigest() error {
	if fileExists(a.path(ConfigStateFile)) {
		return nil
	}
	d, err := ConfigDigest(a.userData)
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
	return configLabel(strings.TrimSpace(string(b)))
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
