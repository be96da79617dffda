package ignition

import (
	"context"
	"net/url"
	"strings"

	"github.com/coreos/ignition/v2/config/v3_5/types"
)

// FetchingCache is the ContentCache a later boot confirms the stored
// config with (agent): the redacted stored config carries a remote
// content that held the bootstrap token inline, redacted, and its stored
// copy is gone (Redact's Dropped), so redacting the user-data again needs
// the original. On a miss in Cache it fetches what the user-data names by
// that hash, verified against it, and keeps nothing: a confirmation must
// not bring the token back to the node's disk.
type FetchingCache struct {
	Ctx     context.Context
	Cache   ContentCache
	Fetcher Fetcher
	// Sources maps a verification hash to the URL the user-data fetches
	// it from (RemoteSources).
	Sources map[string]string
}

// Load implements ContentCache.
func (c FetchingCache) Load(hash string) ([]byte, bool) {
	hash = strings.ToLower(hash)
	if c.Cache != nil {
		if raw, ok := c.Cache.Load(hash); ok {
			return raw, true
		}
	}
	src, ok := c.Sources[hash]
	if !ok || c.Fetcher == nil {
		return nil, false
	}
	raw, err := c.Fetcher.Get(c.Ctx, src)
	if err != nil {
		return nil, false
	}
	algo, _, _ := strings.Cut(hash, "-")
	if got, ok := digestOf(algo, raw); !ok || got != hash {
		return nil, false
	}
	return raw, true
}

// Save implements ContentCache: it keeps nothing.
func (FetchingCache) Save(string, []byte) error { return nil }

// RemoteSources maps each http(s) resource's verification hash in cfg to
// its URL.
func RemoteSources(cfg *Config) map[string]string {
	out := map[string]string{}
	add := func(r types.Resource) {
		if r.Source == nil || r.Verification.Hash == nil {
			return
		}
		if u, err := url.Parse(*r.Source); err == nil && (u.Scheme == "http" || u.Scheme == "https") {
			out[strings.ToLower(*r.Verification.Hash)] = *r.Source
		}
	}
	for _, f := range cfg.Ignition.Storage.Files {
		add(f.Contents)
		for _, a := range f.Append {
			add(a)
		}
	}
	return out
}
