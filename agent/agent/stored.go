package agent

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"sync"

	"github.com/drover-os/drover/agent/ignition"
	"github.com/drover-os/drover/agent/nodeconfig"
)

// The stored config (StoredConfig) is what a later boot may re-apply, but
// only once the metadata service has answered: root on the node (a
// privileged pod) can rewrite it, and config.sha256 beside it; the
// user-data cannot be rewritten from the node. The stored config is
// confirmed against the user-data: it must be the user-data itself or,
// once the bootstrap token was redacted, exactly what redacting the
// user-data gives. A stored config that is neither (or none at all, on a
// node provisioned before) is reported as drift, and the user-data is
// applied instead (config).

// confirmStored says why the stored config is not the user-data's, or ""
// when it is. The user-data's remote contents missing from the node's
// cache (those that held the token, inlined redacted in the stored
// config) are fetched again for the comparison, verified, and not kept.
func (a *Agent) confirmStored(ctx context.Context, stored, userData []byte) string {
	cache := ignition.ContentCache(ignition.DirCache(a.path(ContentsDir)))
	if cfg, err := ignition.Parse(userData); err == nil && a.env.Fetcher != nil {
		cache = ignition.FetchingCache{Ctx: ctx, Cache: cache, Fetcher: a.env.Fetcher, Sources: ignition.RemoteSources(cfg)}
	}
	return confirmWith(stored, userData, cache)
}

// confirmWith is confirmStored with the contents from cache.
func confirmWith(stored, userData []byte, cache ignition.ContentCache) string {
	if bytes.Equal(stored, userData) {
		return ""
	}
	secret := tokenSecretOf(userData)
	if secret == "" {
		return fmt.Sprintf("%s (sha256 %s) is not the instance's user-data (sha256 %s), which holds no bootstrap token to have been redacted",
			StoredConfig, digest(stored)[:12], digest(userData)[:12])
	}
	red, err := ignition.Redact(userData, secret, nodeconfig.RedactedSecret, cache)
	if err != nil {
		return fmt.Sprintf("%s cannot be compared with the instance's user-data: redacting the user-data: %v", StoredConfig, err)
	}
	if !bytes.Equal(red.Config, stored) {
		return fmt.Sprintf("%s (sha256 %s) is neither the instance's user-data (sha256 %s) nor its redacted form (sha256 %s): it was changed on the node",
			StoredConfig, digest(stored)[:12], digest(userData)[:12], digest(red.Config)[:12])
	}
	return ""
}

// tokenSecretOf is the bootstrap token's secret in a user-data's node
// file; "" when there is none.
func tokenSecretOf(userData []byte) string {
	cfg, err := ignition.Parse(userData)
	if err != nil {
		return ""
	}
	nf, ok := cfg.File(NodeFile)
	if !ok {
		return ""
	}
	c, err := nodeconfig.Parse(nf, NodeFile)
	if err != nil {
		return ""
	}
	return nodeconfig.TokenSecret(c.Cluster.BootstrapToken)
}

// pruneContents removes from ContentsDir what the user-data does not
// name by hash: the store is the user-data's remote contents, and a file
// the user-data does not name was put there by something else. It says
// what it removed.
func (a *Agent) pruneContents(userData []byte) ([]string, error) {
	keep := map[string]string{}
	if cfg, err := ignition.Parse(userData); err == nil {
		keep = ignition.RemoteSources(cfg)
	}
	entries, err := os.ReadDir(a.path(ContentsDir))
	if errors.Is(err, os.ErrNotExist) {
		return nil, nil
	}
	if err != nil {
		return nil, fmt.Errorf("reading %s: %w", ContentsDir, err)
	}
	var gone []string
	for _, e := range entries {
		if _, ok := keep[e.Name()]; ok {
			continue
		}
		p := filepath.Join(ContentsDir, e.Name())
		if err := os.RemoveAll(a.path(p)); err != nil {
			return gone, fmt.Errorf("removing %s, which the user-data does not name: %w", p, err)
		}
		gone = append(gone, p)
	}
	return gone, nil
}

// knownDrift is drift the agent found once, not by re-checking a path:
// the guard reports it on every round with what it finds itself.
type knownDrift struct {
	mu    sync.Mutex
	drift []Drift
}

func (k *knownDrift) add(d Drift) {
	k.mu.Lock()
	defer k.mu.Unlock()
	k.drift = append(k.drift, d)
}

func (k *knownDrift) list() []Drift {
	k.mu.Lock()
	defer k.mu.Unlock()
	return append([]Drift(nil), k.drift...)
}
