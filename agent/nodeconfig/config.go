package nodeconfig

import (
	"encoding/json"
	"fmt"
	"strings"
)

// The document's type, checked exactly.
const (
	APIVersion = "drover.dev/v1alpha1"
	Kind       = "NodeConfig"
)

// Path is where the node file lands on the node (an Ignition storage.files
// entry in the user-data).
const Path = "/etc/drover/node.yaml"

// Defaults applied by Parse when the document leaves a field out.
const (
	DefaultClusterDNS = "10.96.0.10"
	DefaultDomain     = "cluster.local"
	DefaultMaxPods    = 110
	// DefaultSandboxImage is the pod sandbox image drover build ships in
	// the image (SandboxArchive, from cmd/drover-pause) and the agent
	// imports into containerd at every boot: a node never pulls it, so
	// pods start where no registry can be reached. The name is drover's
	// own: the image is not registry.k8s.io's pause, and nothing may
	// mistake one for the other.
	DefaultSandboxImage = "drover.dev/pause:3.10"
)

// SandboxArchive is the OCI image layout (a tar) of DefaultSandboxImage in
// the image: an index for linux/amd64 and linux/arm64, named by the
// io.containerd.image.name annotation.
const SandboxArchive = "/usr/lib/drover/images/pause.tar"

// Config is a parsed and validated node file, defaults filled in.
type Config struct {
	APIVersion string
	Kind       string
	Cluster    Cluster
	Kubelet    Kubelet
	Containerd Containerd
	// Registries configures how the kubelet authenticates to registries
	// (the ACR credential provider).
	Registries Registries
	// Storage says where container storage lives (StorageAuto,
	// StorageRequired, StorageSystem).
	Storage string
}

// Cluster says where the API server is, how to trust it and how to
// authenticate to it during TLS bootstrap.
type Cluster struct {
	// Server is the API server's https URL.
	Server string
	// CAData holds the cluster CA as PEM certificates. Exactly one of CAData
	// and CAHash is set.
	CAData string
	// CAHash pins the cluster CA as "sha256:<hex of the SPKI>" (the kubeadm
	// discovery-token-ca-cert-hash form), lower case.
	CAHash string
	// BootstrapToken is "<id>.<secret>", the credential of the bootstrap
	// kubeconfig; "<id>.redacted" (RedactedSecret) in a joined node's stored
	// node file, once the kubelet holds its own certificate (ParseJoined).
	BootstrapToken string
	// DNS lists the cluster DNS service IPs, in canonical form.
	DNS []string
	// Domain is the cluster domain.
	Domain string
}

// Kubelet holds what the node file sets on the kubelet.
type Kubelet struct {
	// Labels are the user's node labels (the ECS facts labels are added at
	// render time, see NodeLabels).
	Labels map[string]string
	// Taints are registered with the Node at registration.
	Taints []Taint
	// MaxPods caps the pods on the node.
	MaxPods int32
	// Config is a JSON object merged field by field into the rendered
	// KubeletConfiguration, last; nil when the node file has none.
	Config json.RawMessage
}

// Taint is one kubelet.taints entry, "key[=value]:Effect".
type Taint struct {
	Key    string
	Value  string
	Effect string
}

// String gives the taint in the form it was written.
func (t Taint) String() string {
	if t.Value == "" {
		return t.Key + ":" + t.Effect
	}
	return t.Key + "=" + t.Value + ":" + t.Effect
}

// Containerd holds what the node file sets on containerd.
type Containerd struct {
	// SandboxImage is the pause image of every pod sandbox.
	SandboxImage string
	// Mirrors maps a registry host ("docker.io", "registry.k8s.io:443") to
	// the mirror URLs tried, in order, before the registry itself.
	Mirrors map[string][]string
}

// Problem is one thing wrong with a node file, at a line and a field path
// such as "kubelet.taints[1]".
type Problem struct {
	Source  string
	Path    string
	Line    int
	Message string
}

// String gives "<source>:<line>: <path>: <message>"; the line is left out
// when unknown and the path when the problem is with the whole document.
func (p Problem) String() string {
	addr, msg := p.Split()
	return addr + ": " + msg
}

// Split gives the problem's address ("<source>:<line>") and the rest
// ("<path>: <message>"), for callers that put the address where they put
// their own (the Ignition problem list's JSON path).
func (p Problem) Split() (addr, msg string) {
	addr = p.Source
	if p.Line > 0 {
		addr += fmt.Sprintf(":%d", p.Line)
	}
	msg = p.Message
	if p.Path != "" {
		msg = p.Path + ": " + msg
	}
	return addr, msg
}

// Error is what Parse returns for a node file with problems: all of them, in
// document order.
type Error struct {
	Problems []Problem
}

func (e *Error) Error() string {
	lines := make([]string, len(e.Problems))
	for i, p := range e.Problems {
		lines[i] = p.String()
	}
	return strings.Join(lines, "\n")
}

// Parse reads a node file; source names it in errors (a path, or
// "user-data:/etc/drover/node.yaml"). A document with any problem gives a
// nil Config and an *Error listing every problem.
func Parse(data []byte, source string) (*Config, error) {
	return parseErr(data, source, false)
}

// ParseJoined is Parse for the node file a joined node keeps: its bootstrap
// token's secret may have been replaced by RedactedSecret.
func ParseJoined(data []byte, source string) (*Config, error) {
	return parseErr(data, source, true)
}

func parseErr(data []byte, source string, joined bool) (*Config, error) {
	c, problems := parse(data, source, joined)
	if len(problems) > 0 {
		return nil, &Error{Problems: problems}
	}
	return c, nil
}

// Validate lists every problem of a node file, in document order; none means
// Parse accepts it.
func Validate(data []byte, source string) []Problem {
	_, problems := parse(data, source, false)
	return problems
}

// ValidateJoined is Validate for a joined node's stored node file (see
// ParseJoined).
func ValidateJoined(data []byte, source string) []Problem {
	_, problems := parse(data, source, true)
	return problems
}

// RedactedSecret stands for the bootstrap token's secret in what a joined
// node keeps: the token ID (public, it names the token) stays.
const RedactedSecret = "redacted"

// TokenSecret is the secret half of a bootstrap token "<id>.<secret>"; ""
// when there is none or it is redacted.
func TokenSecret(token string) string {
	_, secret, ok := strings.Cut(token, ".")
	if !ok || secret == RedactedSecret {
		return ""
	}
	return secret
}

// Redacted says the bootstrap token's secret was removed after the join:
// the node can no longer bootstrap a new client certificate.
func (c Cluster) Redacted() bool {
	_, secret, _ := strings.Cut(c.BootstrapToken, ".")
	return secret == RedactedSecret
}
