package smoke

import (
	"encoding/json"
	"maps"
	"strings"
	"testing"

	"github.com/drover-os/drover/harness/registry"
)

const sandboxDigest = "sha256:af97f96af84dad90021ab1148d89a55fd87f51660c35d6912ed236b066549115"

// probeImages is the probe's "images" answer holding the given records.
func probeImages(images ...nodeImage) string {
	b, _ := json.Marshal(map[string]any{"images": images})
	return string(b)
}

func TestJudgeSandboxShipped(t *testing.T) {
	want := Versions{Sandbox: "drover.dev/pause:3.10", SandboxDigest: sandboxDigest}
	good := [][]string{{"100.64.0.2:5000/drover/hello@sha256:1", "100.64.0.2:5000/drover/hello:v1"},
		{"drover.dev/pause@" + sandboxDigest, "drover.dev/pause:3.10"}}
	labels := map[string]string{"io.cri-containerd.image": "managed", "io.cri-containerd.pinned": "pinned"}
	byName := nodeImage{Name: "drover.dev/pause:3.10", Digest: sandboxDigest, Labels: labels}
	byDigest := nodeImage{Name: "drover.dev/pause@" + sandboxDigest, Digest: sandboxDigest, Labels: labels}
	hello := nodeImage{Name: "100.64.0.2:5000/drover/hello:v1", Digest: "sha256:1", Labels: map[string]string{"io.cri-containerd.image": "managed"}}
	pinned := probeImages(hello, byName, byDigest)
	reqs := []registry.Request{{Method: "GET", Path: "/v2/drover/hello/manifests/v1"}}
	if d, err := JudgeSandboxShipped(want, good, pinned, reqs); err != nil {
		t.Fatalf("good node judged bad: %v", err)
	} else {
		t.Log(d)
	}
	with := func(im nodeImage, edit func(*nodeImage)) nodeImage {
		im.Labels = maps.Clone(im.Labels)
		edit(&im)
		return im
	}
	for _, tc := range []struct {
		name   string
		want   Versions
		images [][]string
		probe  string
		reqs   []registry.Request
		err    string
	}{
		{"no sandbox in the manifest", Versions{}, good, pinned, nil, "names no sandbox image"},
		{"not listed by the kubelet", want, good[:1], pinned, nil, "status.images has no drover.dev/pause:3.10"},
		{"listed with another digest", want, [][]string{{"drover.dev/pause@sha256:00", "drover.dev/pause:3.10"}}, pinned, nil, "not as drover.dev/pause@" + sandboxDigest},
		{"not in containerd's list", want, good, probeImages(hello), nil, "containerd's image list on the node has no drover.dev/pause:3.10 (1 images)"},
		{"only by name in containerd's list", want, good, probeImages(byName), nil, "has no drover.dev/pause@" + sandboxDigest},
		{"another digest in containerd", want, good, probeImages(with(byName, func(im *nodeImage) { im.Digest = "sha256:ff" }), byDigest), nil,
			"containerd holds drover.dev/pause:3.10 at sha256:ff"},
		{"not pinned", want, good, probeImages(with(byName, func(im *nodeImage) { delete(im.Labels, "io.cri-containerd.pinned") }), byDigest), nil,
			"containerd holds drover.dev/pause:3.10 without the CRI's pinned label"},
		{"pinned label of another value", want, good, probeImages(byName, with(byDigest, func(im *nodeImage) { im.Labels["io.cri-containerd.pinned"] = "no" })), nil,
			"containerd holds drover.dev/pause@" + sandboxDigest + " without the CRI's pinned label"},
		{"containerd did not answer", want, good, `{"images":null,"error":"containerd images List on /host/run/containerd/containerd.sock: connection refused"}`, nil,
			"containerd's images on the node: containerd images List on /host/run/containerd/containerd.sock: connection refused"},
		{"pulled from the registry", want, good, pinned, []registry.Request{{Method: "GET", Path: "/v2/pause/manifests/3.10"}}, "asked for a pause image: GET /v2/pause/manifests/3.10"},
		{"probe answered garbage", want, good, "not json", nil, "the images probe answered"},
	} {
		_, err := JudgeSandboxShipped(tc.want, tc.images, tc.probe, tc.reqs)
		if err == nil || !strings.Contains(err.Error(), tc.err) {
			t.Errorf("%s: err %v, want %q", tc.name, err, tc.err)
		}
	}
}

func TestJudgeOffline(t *testing.T) {
	if _, err := JudgeOffline(nil); err != nil {
		t.Errorf("no requests judged bad: %v", err)
	}
	_, err := JudgeOffline([]registry.Request{{Method: "HEAD", Path: "/v2/drover/hello/manifests/v1", Refused: true}})
	if err == nil || !strings.Contains(err.Error(), "asked the refusing registry 1 times: HEAD /v2/drover/hello/manifests/v1") {
		t.Errorf("a request during the window: err %v", err)
	}
}
