package smoke

import (
	"encoding/json"
	"strings"
	"testing"

	"github.com/drover-os/drover/harness/registry"
)

const sandboxDigest = "sha256:a9c3b908644d23c5c3ec61b1f1f4493bfc5c38c08955c1c0fd0cacbe3c718dbf"

func ctrLs(lines ...string) string {
	b, _ := json.Marshal(map[string]string{"images": "REF TYPE DIGEST SIZE PLATFORMS LABELS\n" + strings.Join(lines, "\n") + "\n"})
	return string(b)
}

func TestJudgeSandboxShipped(t *testing.T) {
	want := Versions{Sandbox: "drover.dev/pause:3.10", SandboxDigest: sandboxDigest}
	good := [][]string{{"100.64.0.2:5000/drover/hello@sha256:1", "100.64.0.2:5000/drover/hello:v1"},
		{"drover.dev/pause@" + sandboxDigest, "drover.dev/pause:3.10"}}
	pinned := "drover.dev/pause:3.10 application/vnd.oci.image.index.v1+json " + sandboxDigest + " 1.3 MiB linux/amd64,linux/arm64 io.cri-containerd.image=managed,io.cri-containerd.pinned=pinned"
	reqs := []registry.Request{{Method: "GET", Path: "/v2/drover/hello/manifests/v1"}}
	if d, err := JudgeSandboxShipped(want, good, ctrLs(pinned), reqs); err != nil {
		t.Fatalf("good node judged bad: %v", err)
	} else {
		t.Log(d)
	}
	for _, tc := range []struct {
		name   string
		want   Versions
		images [][]string
		probe  string
		reqs   []registry.Request
		err    string
	}{
		{"no sandbox in the manifest", Versions{}, good, ctrLs(pinned), nil, "names no sandbox image"},
		{"not listed by the kubelet", want, good[:1], ctrLs(pinned), nil, "status.images has no drover.dev/pause:3.10"},
		{"listed with another digest", want, [][]string{{"drover.dev/pause@sha256:00", "drover.dev/pause:3.10"}}, ctrLs(pinned), nil, "not as drover.dev/pause@" + sandboxDigest},
		{"not in containerd's list", want, good, ctrLs(), nil, "containerd's image list on the node has no drover.dev/pause:3.10"},
		{"another digest in containerd", want, good, ctrLs(strings.Replace(pinned, sandboxDigest, "sha256:ff", 1)), nil, "containerd holds drover.dev/pause:3.10 at sha256:ff"},
		{"not pinned", want, good, ctrLs(strings.Replace(pinned, ",io.cri-containerd.pinned=pinned", "", 1)), nil, "without the CRI's pinned label"},
		{"pinned label of another value", want, good, ctrLs(strings.Replace(pinned, "pinned=pinned", "pinned=no", 1)), nil, "without the CRI's pinned label"},
		{"ctr failed", want, good, `{"images":"","error":"ctr: connection refused"}`, nil, "ctr on the node: ctr: connection refused"},
		{"pulled from the registry", want, good, ctrLs(pinned), []registry.Request{{Method: "GET", Path: "/v2/pause/manifests/3.10"}}, "asked for a pause image: GET /v2/pause/manifests/3.10"},
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
