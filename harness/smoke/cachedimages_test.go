package smoke

import (
	"encoding/json"
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
			"the cached images' pods made 1 registry requests: GET /v2/drover/probe-big/manifests/v1 (503)"},
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

func TestJudgePullRecord(t *testing.T) {
	const id = "sha256:5fb319674d0ec3bbe590b9935fbde8022d88cc90bae696b69c93b0474aa0b544"
	// The file name is the SHA-256 of the image ID (kubelet's fs_pullrecords.go).
	path := PulledRecordPath(id)
	if path != "/var/lib/kubelet/image_manager/pulled/sha256-d25f2d973c70d700b8c83d464ebeb8044cd44a02c4500580349005455316cd84" {
		t.Errorf("path %s", path)
	}
	const image = "100.64.0.2:5000/drover/hello"
	read := func(exists bool, content string) string {
		b, _ := json.Marshal(map[string]any{"path": path, "exists": exists, "content": content})
		return string(b)
	}
	good := `{"kind":"ImagePulledRecord","apiVersion":"kubelet.config.k8s.io/v1beta1","lastUpdatedTime":"2026-12-06T01:45:56Z","imageRef":"` + id + `","credentialMapping":{"` + image + `":{"nodePodsAccessible":true}}}`
	d, err := JudgePullRecord(read(true, good), path, id, image)
	if err != nil || !strings.Contains(d, image) {
		t.Fatalf("good record judged bad: %q %v", d, err)
	}
	for _, tc := range []struct{ name, msg, want string }{
		{"no record", read(false, ""), "holds no pull record of " + id},
		{"another image ID", read(true, strings.Replace(good, id, "sha256:00", 1)), "is of sha256:00"},
		{"pulled under another name", read(true, strings.Replace(good, image, "cache.smoke.test/drover/hello", 1)), "has no pull of " + image},
		{"pulled with a secret", read(true, strings.Replace(good, `"nodePodsAccessible":true`, `"kubernetesSecrets":[{"uid":"u","namespace":"n","name":"s","credentialHash":"h"}]`, 1)), "has no pull of " + image},
		{"not JSON", read(true, "garbage"), "pull record"},
	} {
		if _, err := JudgePullRecord(tc.msg, path, id, image); err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("%s: got %v, want %q", tc.name, err, tc.want)
		}
	}
}

func TestRequestsSeen(t *testing.T) {
	if got := requestsSeen(nil); got != "no registry requests" {
		t.Errorf("none: %q", got)
	}
	got := requestsSeen([]registry.Request{{Method: "GET", Path: "/v2/"}, {Method: "HEAD", Path: "/v2/drover/hello/manifests/v1", Refused: true}})
	if want := "2 registry requests: GET /v2/, HEAD /v2/drover/hello/manifests/v1 (503)"; got != want {
		t.Errorf("got %q, want %q", got, want)
	}
}
