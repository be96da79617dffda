// Package nodecontract holds the values a drover node and the fleet
// commands must agree on, so that each is defined, and cut, in one place:
// the agent labels its Node with them, drover publish tags the image with
// one, and drover rollout compares the launch template's with the Node's
// to tell whether an instance runs what the group now launches; the agent
// sets the Node conditions drover rollout --repair reads (conditions.go).
//
// The config digest is defined over the user-data as the agent parses it,
// so this package imports the agent's Ignition and node-file parsers, and
// nothing else of the agent (its state machine stays out of rollout).
package nodecontract

import (
	"crypto/sha256"
	"encoding/hex"
	"fmt"

	"github.com/drover-os/drover/agent/ignition"
	"github.com/drover-os/drover/agent/nodeconfig"
)

// The labels the agent sets on its Node; a node file may not set them
// (nodeconfig reserves them, so they are declared there).
const (
	// LabelBuildID is the image's build ID (the manifest's buildID, the
	// image's os-release BUILD_ID).
	LabelBuildID = nodeconfig.LabelBuildID
	// LabelNodeConfig is ConfigLabel of the user-data the instance was
	// launched with.
	LabelNodeConfig = nodeconfig.LabelNodeConfig
)

// ImageTagBuildID is the ECS image tag drover publish sets to the
// manifest's build ID, by which drover rollout finds a manifest's image.
const ImageTagBuildID = "drover:build-id"

// TokenPlaceholder stands for the bootstrap token in ConfigDigest.
const TokenPlaceholder = "<bootstrap-token>"

// ConfigLabelLen is the length of a node-config label value: a label value
// is at most 63 characters, and 40 hex digits (160 bits) tell
// configurations apart as well as a commit ID does.
const ConfigLabelLen = 40

// ConfigDigest is the sha256 (hex, 64 digits) of the user-data with its
// node file's bootstrap token, whole (id and secret), replaced by
// TokenPlaceholder, so that rotating the token (a new template version
// for new instances) replaces no node. drover rollout computes it from
// the user-data it puts in a launch template, the agent from the
// user-data it received: the same bytes give the same digest.
func ConfigDigest(userData []byte) (string, error) {
	cfg, err := ignition.Parse(userData)
	if err != nil {
		return "", fmt.Errorf("the user-data is not an Ignition config the agent accepts: %w", err)
	}
	token := ""
	if nf, ok := cfg.File(nodeconfig.Path); ok {
		c, err := nodeconfig.Parse(nf, nodeconfig.Path)
		if err != nil {
			return "", err
		}
		token = c.Cluster.BootstrapToken
	}
	if token == "" {
		return hexSHA256(userData), nil
	}
	red, err := ignition.Redact(userData, token, TokenPlaceholder, nil)
	if err != nil {
		return "", err
	}
	return hexSHA256(red.Config), nil
}

// ConfigLabel is the LabelNodeConfig value of a ConfigDigest: its first
// ConfigLabelLen hex digits; "" for anything shorter (an unknown or
// damaged digest).
func ConfigLabel(digest string) string {
	if len(digest) < ConfigLabelLen {
		return ""
	}
	return digest[:ConfigLabelLen]
}

// UserDataLabel is ConfigLabel(ConfigDigest(userData)).
func UserDataLabel(userData []byte) (string, error) {
	d, err := ConfigDigest(userData)
	if err != nil {
		return "", err
	}
	return ConfigLabel(d), nil
}

func hexSHA256(b []byte) string {
	s := sha256.Sum256(b)
	return hex.EncodeToString(s[:])
}
