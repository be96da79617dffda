package smoke

import (
	"slices"
	"strings"
	"testing"

	"github.com/drover-os/drover/harness/registry"
)

func TestJudgeCachedImages(t *testing.T) {
	cached := []CachedImage{
		{Name: "cache.smoke.test/drover/hello:v1", Digest: "sha256:a5", Location: "root"},
		{Name: "cache.smoke.test/drover/probe-big:v1", Digest: "sha256:d7", Location: "disk"},
	}
	pinned := map[string]string{"io.cri-containerd.image": "managed", "io.cri-containerd.pinned": "pinned"}
	hello := nodeImage{Name: cached[0].Name, Digest: "sha256:a5", Labels: pinned}
	big := nodeImage{Name: cached[1].Name, Digest: "sha256:d7", Labels: pinned}
	refused := []registry.Request{{Method: "HEAD", Path: "/v2/drover/probe/manifests/v1", Refused: true}}
	d, err := JudgeCachedImages(cached, probeImages(hello, big), nil, refused)
	if err != nil {
		t.Fatalf("good node judged bad: %v", err)
	}
	if !strings.Contains(d, "refused the uncached pull 1 times (503: HEAD /v2/drover/probe/manifests/v1)") {
		t.Errorf("detail %q", d)
	}
	unpinned := big
	unpinned.Labels = map[string]string{"io.cri-containerd.image": "managed"}
	moved := big
	moved.Digest = "sha256:00"
	for _, tc := range []struct {
		name            string
		probe           string
		during, control []registry.Request
		want            string
	}{
		{"the disk's image pulled", probeImages(hello, big), []registry.Request{{Method: "GET", Path: "/v2/drover/probe-big/manifests/v1", Refused: true}}, refused,
			"the cached images' pods made 1 registry requests: GET /v2/drover/probe-big/manifests/v1"},
		{"the root's image missing", probeImages(big), nil, refused, "has no cache.smoke.test/drover/hello:v1"},
		{"not pinned", probeImages(hello, unpinned), nil, refused, "without the CRI's pinned label"},
		{"another digest", probeImages(hello, moved), nil, refused, "at sha256:00, the image caches sha256:d7"},
		{"the registry served the control", probeImages(hello, big), nil, []registry.Request{{Method: "HEAD", Path: "/v2/drover/probe/manifests/v1"}},
			"the uncached image's pull was not refused"},
		{"no control request", probeImages(hello, big), nil, nil, "not refused by the registry (0 requests"},
	} {
		if _, err := JudgeCachedImages(cached, tc.probe, tc.during, tc.control); err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("%s: got %v, want %q", tc.name, err, tc.want)
		}
	}
}

// The cached images' hosts are mirrored to the harness registry, and the
// cache disk is the last data disk on every boot.
func TestCacheHostsAndDisk(t *testing.T) {
	e := &Env{cacheHosts: cachedHosts([]CachedImage{{Name: "c.test/a:v1"}, {Name: "c.test/b:v1"}, {Name: "d.test:5000/c:v1"}})}
	if !slices.Equal(e.cacheHosts, []string{"c.test", "d.test:5000"}) {
		t.Errorf("hosts %q", e.cacheHosts)
	}
	d := &dataDisks{Empty: "e", Full: "f", Cache: "c"}
	if !slices.Equal(d.order(false), []string{"e", "f", "c"}) || !slices.Equal(d.order(true), []string{"f", "e", "c"}) {
		t.Errorf("order %q %q", d.order(false), d.order(true))
	}
}
