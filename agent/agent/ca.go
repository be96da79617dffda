package agent

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"os"
	"time"

	"github.com/drover-os/drover/agent/kube"
	"github.com/drover-os/drover/agent/nodeconfig"
	"github.com/drover-os/drover/internal/atomicfile"
)

// ClusterCA is where the CA found by discovery is kept: /var persists and
// /etc does not, and discovery runs once — a later boot trusts what the
// first one pinned, not whatever the network serves that day.
const ClusterCA = StateDir + "/cluster-ca.crt"

// clusterCA sets Cluster.CAData when the node file pins the CA by caHash
// only: from the stored CA, or by discovery on the first boot.
func (a *Agent) clusterCA(ctx context.Context) (string, error) {
	c := &a.node.Cluster
	if c.CAData != "" {
		return "", nil
	}
	if stored, err := os.ReadFile(a.path(ClusterCA)); err == nil {
		ca, err := nodeconfig.PinnedCA(stored, c.CAHash)
		if err != nil || !bytes.Equal(ca, stored) {
			return "", fmt.Errorf("stored cluster CA %s does not match cluster.caHash (%v); the state of this instance is not its own — replace the instance", ClusterCA, err)
		}
		c.CAData = string(ca)
		a.rec.Note("cluster CA: " + ClusterCA + " (pinned on the first boot; not discovered again)")
		return "stored", nil
	} else if !errors.Is(err, os.ErrNotExist) {
		return "", fmt.Errorf("reading the stored cluster CA: %w", err)
	}
	// Retry what may pass by itself (the API server still starting, a
	// token bootstrapsigner has not signed yet) until the phase deadline;
	// a wrong signature or pin is final.
	var ca []byte
	for {
		var err error
		ca, err = a.env.DiscoverCA(ctx, c.Server, c.BootstrapToken, c.CAHash)
		if err == nil {
			break
		}
		if !kube.Retryable(err) {
			return "", err
		}
		select {
		case <-ctx.Done():
			return "", fmt.Errorf("%w (still failing when the phase ended)", err)
		case <-time.After(a.env.Poll):
		}
	}
	// Defence in depth: whatever DiscoverCA returns, only the pinned
	// certificate is kept.
	ca, err := nodeconfig.PinnedCA(ca, c.CAHash)
	if err != nil {
		return "", err
	}
	if err := atomicfile.Write(a.path(ClusterCA), ca, 0o644); err != nil {
		return "", fmt.Errorf("storing the discovered cluster CA: %w", err)
	}
	c.CAData = string(ca)
	a.rec.Note("cluster CA: discovered from cluster-info signed for the bootstrap token, matching cluster.caHash; stored in " + ClusterCA)
	return "discovered", nil
}
