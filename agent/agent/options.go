package agent

import (
	"github.com/drover-os/drover/agent/ignition"
	"github.com/drover-os/drover/agent/nodeconfig"
)

// Options returns the ignition options the agent validates with; `drover
// validate` and `drover-agent validate` use the same, so verdicts agree.
func Options(f ignition.Fetcher) ignition.Options {
	return ignition.Options{Fetcher: f, Extra: NodeFileCheck, CheckWrites: TokenPlaceCheck}
}

// NodeFileCheck validates /etc/drover/node.yaml when the config writes it.
// A config without a node file is refused: the node could not join.
func NodeFileCheck(files map[string][]byte) []ignition.Problem {
	return nodeFileCheck(files, nodeconfig.Validate)
}

// joinedNodeFileCheck is NodeFileCheck for the stored config of a joined
// node, whose bootstrap token may be redacted.
func joinedNodeFileCheck(files map[string][]byte) []ignition.Problem {
	return nodeFileCheck(files, nodeconfig.ValidateJoined)
}

func nodeFileCheck(files map[string][]byte, validate func([]byte, string) []nodeconfig.Problem) []ignition.Problem {
	data, ok := files[NodeFile]
	if !ok {
		return []ignition.Problem{{Path: "$.storage.files", Message: "no " + NodeFile + ": a drover node needs its node file to join the cluster (see docs/node-config.md; `drover userdata` writes one)"}}
	}
	var out []ignition.Problem
	for _, p := range validate(data, NodeFile) {
		// The node file's own address (file:line) stands where a JSON path
		// would, so the line reads "/etc/drover/node.yaml:11: field: …".
		addr, msg := p.Split()
		out = append(out, ignition.Problem{Path: addr, Message: msg})
	}
	return out
}
