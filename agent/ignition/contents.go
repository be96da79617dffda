package ignition

import (
	"bytes"
	"context"
	"crypto/sha256"
	"crypto/sha512"
	"encoding/hex"
	"errors"
	"fmt"
	"hash"
	"net/url"
	"strings"

	"github.com/coreos/ignition/v2/config/v3_5/types"
	"github.com/vincent-petithory/dataurl"

	"github.com/drover-os/drover/internal/gunzip"
)

// maxFileSize bounds one resource's decompressed contents; the config's
// contents together are bounded by maxContentsTotal.
const maxFileSize = 64 << 20

// Fetcher gets the body of an http(s) URL. The agent passes HTTPFetcher;
// tests pass a MapFetcher.
type Fetcher interface {
	Get(ctx context.Context, url string) ([]byte, error)
}

// MapFetcher is an in-memory Fetcher for tests: it serves the bodies it
// holds and fails for any other URL.
type MapFetcher map[string][]byte

// Get returns the body stored for url.
func (m MapFetcher) Get(_ context.Context, url string) ([]byte, error) {
	b, ok := m[url]
	if !ok {
		return nil, fmt.Errorf("GET %s: not found", url)
	}
	return b, nil
}

// resolved is one resource (contents or an append fragment) once known.
type resolved struct {
	data   []byte
	done   bool
	remote string // the http(s) URL still to fetch when !done
}

// fileContents holds what one storage.files entry writes.
type fileContents struct {
	hasSource bool // contents.source given: the file is replaced, not kept
	contents  resolved
	appends   []resolved
}

// complete reports whether every piece is known.
func (f fileContents) complete() bool {
	if !f.contents.done {
		return false
	}
	for _, a := range f.appends {
		if !a.done {
			return false
		}
	}
	return true
}

// decodeLocal resolves what needs no network: absent sources and data:
// URLs, drawn from b. http(s) sources are left for Resolve.
func decodeLocal(files []types.File, b *gunzip.Budget, c *collector) []fileContents {
	out := make([]fileContents, len(files))
	for i, f := range files {
		at := []any{"storage", "files", i}
		out[i].hasSource = f.Contents.Source != nil
		out[i].contents = decodeResource(f.Path, f.Contents, sub(at, "contents"), b, c)
		for j, a := range f.Append {
			out[i].appends = append(out[i].appends, decodeResource(f.Path, a, sub(at, "append", j), b, c))
		}
	}
	return out
}

func decodeResource(file string, r types.Resource, at []any, b *gunzip.Budget, c *collector) resolved {
	if r.Source == nil {
		return resolved{done: true}
	}
	src := *r.Source
	u, err := url.Parse(src)
	if err != nil {
		return resolved{done: true} // Ignition has reported it
	}
	switch u.Scheme {
	case "http", "https":
		if r.Verification.Hash == nil {
			return resolved{done: true} // refused by the policy: never fetched
		}
		return resolved{remote: src}
	case "data":
		du, err := dataurl.DecodeString(src)
		if err != nil {
			return resolved{done: true} // Ignition has reported it
		}
		data, ok := finish(file, "the inline data: URL", du.Data, r, at, b, c)
		return resolved{data: data, done: ok}
	}
	return resolved{done: true} // refused by the policy or by Ignition
}

// Resolve fetches every http(s) source of cfg through f and verifies it
// against its verification.hash. Nothing is written: a config whose remote
// contents fail is refused before the apply starts. The error is Problems.
func Resolve(ctx context.Context, cfg *Config, f Fetcher) error {
	if cfg == nil || f == nil {
		return errors.New("resolving ignition contents: no config or no fetcher")
	}
	c := &collector{tree: cfg.tree}
	resolve(ctx, cfg, f, nil, c)
	if len(c.list) > 0 {
		sortProblems(c.list)
		return Problems(c.list)
	}
	return nil
}

func resolve(ctx context.Context, cfg *Config, f Fetcher, cache ContentCache, c *collector) {
	if cfg.budget == nil {
		cfg.budget = newBudget()
	}
	for i, file := range cfg.Ignition.Storage.Files {
		if i >= len(cfg.files) {
			break
		}
		at := []any{"storage", "files", i}
		fc := &cfg.files[i]
		fetchInto(ctx, f, cache, file.Path, file.Contents, &fc.contents, sub(at, "contents"), cfg.budget, c)
		for j := range fc.appends {
			fetchInto(ctx, f, cache, file.Path, file.Append[j], &fc.appends[j], sub(at, "append", j), cfg.budget, c)
		}
	}
	cfg.dropIfOverBudget()
}

func fetchInto(ctx context.Context, f Fetcher, cache ContentCache, file string, r types.Resource, dst *resolved, at []any, b *gunzip.Budget, c *collector) {
	if dst.done || dst.remote == "" || b.Out() {
		return
	}
	// Only sources with a verification.hash get here (the policy refuses
	// the others), so the hash is the cache key.
	hash := *r.Verification.Hash
	if cache != nil {
		if raw, ok := cache.Load(hash); ok {
			if data, ok := finish(file, "the stored copy of "+fmt.Sprintf("%q", dst.remote), raw, r, at, b, c); ok {
				*dst = resolved{data: data, done: true}
			}
			return
		}
	}
	body, err := f.Get(ctx, dst.remote)
	var refused *DestinationError
	switch {
	case errors.As(err, &refused):
		// The error says what the address is and what to do.
		c.addf(sub(at, "source"), "fetching contents of %s failed: %v", file, err)
		return
	case err != nil:
		c.addf(sub(at, "source"), "fetching contents of %s failed: %v — check that the URL is reachable from the node", file, err)
		return
	}
	data, ok := finish(file, fmt.Sprintf("%q", dst.remote), body, r, at, b, c)
	if !ok {
		return
	}
	if cache != nil {
		if err := cache.Save(hash, body); err != nil {
			c.addf(sub(at, "source"), "contents of %s were fetched and verified but could not be stored for later boots: %v — check the node's /var", file, err)
			return
		}
	}
	*dst = resolved{data: data, done: true}
}

// digestOf gives "<algo>-<hex>" of raw for the hash functions Ignition's
// verification.hash names.
func digestOf(algo string, raw []byte) (string, bool) {
	var h hash.Hash
	switch algo {
	case "sha256":
		h = sha256.New()
	case "sha512":
		h = sha512.New()
	default:
		return "", false
	}
	h.Write(raw)
	return algo + "-" + hex.EncodeToString(h.Sum(nil)), true
}

// finish verifies a resource's raw bytes against its hash (which, as in
// Ignition, covers the compressed form) and decompresses them, drawing
// the decoded bytes from b.
func finish(file, from string, raw []byte, r types.Resource, at []any, b *gunzip.Budget, c *collector) ([]byte, bool) {
	if b.Out() {
		return nil, false // reported at the resource where it ran out
	}
	if r.Verification.Hash != nil {
		want := *r.Verification.Hash
		algo, _, _ := strings.Cut(want, "-")
		got, ok := digestOf(algo, raw)
		if !ok {
			return nil, false // Ignition: "unrecognized hash function"
		}
		if !strings.EqualFold(got, want) {
			c.addf(sub(at, "verification", "hash"), "contents of %s from %s do not match: want %s, got %s — correct verification.hash or the source", file, from, want, got)
			return nil, false
		}
	}
	if r.Compression == nil || *r.Compression == "" {
		if !spend(b, int64(len(raw)), at, c) {
			return nil, false
		}
		return raw, true
	}
	if *r.Compression != "gzip" {
		return nil, false // Ignition: "invalid compression method"
	}
	out, err := gunzip.Bytes(raw, maxFileSize, b)
	switch {
	case errors.Is(err, gunzip.ErrBudget):
		overBudget(at, c)
		return nil, false
	case err != nil:
		c.addf(sub(at, "compression"), "contents of %s from %s do not decompress as gzip: %v — compress them with gzip or drop \"compression\"", file, from, err)
		return nil, false
	}
	return out, true
}

// knownFiles maps each file path to the contents it will have, for the
// Extra checks; files that are kept or appended to on the node, or not yet
// fetched, are left out because their final contents are not known here.
func (cfg *Config) knownFiles() map[string][]byte {
	out := map[string][]byte{}
	for i, f := range cfg.Ignition.Storage.Files {
		if i >= len(cfg.files) {
			break
		}
		fc := cfg.files[i]
		if !fc.hasSource || !fc.complete() {
			continue
		}
		out[cleanPath(f.Path)] = fc.final(nil)
	}
	return out
}

// final is the file's contents: its own (or the existing ones when it has
// no source) followed by every append fragment.
func (f fileContents) final(existing []byte) []byte {
	var b bytes.Buffer
	if f.hasSource {
		b.Write(f.contents.data)
	} else {
		b.Write(existing)
	}
	for _, a := range f.appends {
		b.Write(a.data)
	}
	return b.Bytes()
}
