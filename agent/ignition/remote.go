package ignition

import (
	"context"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"sync"
	"time"

	"github.com/drover-os/drover/internal/atomicfile"
)

// Limits of HTTPFetcher's defaults.
const (
	maxRemoteTotal = 256 << 20 // every remote content of one config together
	maxRedirects   = 3
	remoteTimeout  = 2 * time.Minute // one request, body included
)

// HTTPFetcher fetches remote contents with a bounded body size, a bounded
// total over all its fetches, and (by default) RemoteClient.
type HTTPFetcher struct {
	// Client defaults to RemoteClient().
	Client *http.Client
	// MaxBytes bounds one body; zero means 64 MiB.
	MaxBytes int64
	// MaxTotal bounds all bodies this fetcher reads; zero means 256 MiB.
	MaxTotal int64

	mu      sync.Mutex
	fetched int64
}

// RemoteClient is the agent's client for remote contents:
// RemoteClientFor(NodeDestinations).
func RemoteClient() *http.Client { return RemoteClientFor(NodeDestinations) }

// RemoteClientFor is the one client remote contents are fetched with, on
// the node and by drover validate. It connects only where d allows,
// judged on the address each connection is made to (see Destinations). It
// ignores the proxy environment variables: the agent's environment is not
// the user's configuration (and Ignition's own proxy setting is refused;
// the node file has none), and a proxy would connect for it, past the
// check. Connecting, the TLS handshake, the response headers and the whole
// request are each bounded, and it follows at most 3 redirects.
func RemoteClientFor(d Destinations) *http.Client {
	dialer := &net.Dialer{Timeout: 10 * time.Second, KeepAlive: 30 * time.Second, Control: d.control}
	tr := &http.Transport{
		Proxy:                 nil,
		DialContext:           dialer.DialContext,
		TLSHandshakeTimeout:   10 * time.Second,
		ResponseHeaderTimeout: 30 * time.Second,
		IdleConnTimeout:       30 * time.Second,
		ForceAttemptHTTP2:     true,
	}
	return &http.Client{Transport: tr, Timeout: remoteTimeout, CheckRedirect: func(req *http.Request, via []*http.Request) error {
		if len(via) > maxRedirects {
			return fmt.Errorf("stopped after %d redirects (at most %d are followed)", maxRedirects, maxRedirects)
		}
		return nil
	}}
}

// Get fetches url and fails on any status but 200.
func (h *HTTPFetcher) Get(ctx context.Context, url string) ([]byte, error) {
	client := h.Client
	if client == nil {
		client = RemoteClient()
	}
	limit := h.MaxBytes
	if limit <= 0 {
		limit = maxFileSize
	}
	total := h.MaxTotal
	if total <= 0 {
		total = maxRemoteTotal
	}
	h.mu.Lock()
	left := total - h.fetched
	h.mu.Unlock()
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, url, nil)
	if err != nil {
		return nil, fmt.Errorf("GET %s: %w", url, err)
	}
	resp, err := client.Do(req)
	if err != nil {
		return nil, fmt.Errorf("GET %s: %w", url, err)
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		return nil, fmt.Errorf("GET %s: %s", url, resp.Status)
	}
	body, err := io.ReadAll(io.LimitReader(resp.Body, min(limit, left)+1))
	if err != nil {
		return nil, fmt.Errorf("GET %s: reading body: %w", url, err)
	}
	h.mu.Lock()
	h.fetched += int64(len(body))
	h.mu.Unlock()
	switch {
	case int64(len(body)) > limit:
		return nil, fmt.Errorf("GET %s: body larger than %d bytes", url, limit)
	case int64(len(body)) > left:
		return nil, fmt.Errorf("GET %s: the config's remote contents together are larger than %d bytes", url, total)
	}
	return body, nil
}

// ContentCache keeps remote contents that passed their verification.hash,
// keyed by that hash ("sha256-<hex>"), so that a node fetches each once:
// later boots re-apply the stored config from the cache, not the network.
type ContentCache interface {
	// Load returns the contents stored for hash, only if they still
	// match it.
	Load(hash string) ([]byte, bool)
	Save(hash string, raw []byte) error
}

// DirCache is a ContentCache in a directory, one file per hash named by
// the hash (content-addressed), readable by root only: contents may be
// secrets the user-data only points at.
type DirCache string

var hashName = regexp.MustCompile(`^sha(256|512)-[0-9a-f]+$`)

// Load implements ContentCache.
func (d DirCache) Load(hash string) ([]byte, bool) {
	hash = strings.ToLower(hash)
	if !hashName.MatchString(hash) {
		return nil, false
	}
	raw, err := os.ReadFile(filepath.Join(string(d), hash))
	if err != nil {
		return nil, false
	}
	algo, _, _ := strings.Cut(hash, "-")
	if got, ok := digestOf(algo, raw); !ok || got != hash {
		return nil, false // damaged: fetch again
	}
	return raw, true
}

// Save implements ContentCache.
func (d DirCache) Save(hash string, raw []byte) error {
	hash = strings.ToLower(hash)
	if !hashName.MatchString(hash) {
		return fmt.Errorf("storing remote contents: %q is not a verification hash", hash)
	}
	if err := os.MkdirAll(string(d), 0o700); err != nil {
		return fmt.Errorf("storing remote contents: %w", err)
	}
	return atomicfile.Write(filepath.Join(string(d), hash), raw, 0o600)
}
