package build

import (
	"reflect"
	"testing"
	"testing/fstest"
)

// TestReadReleaseNotes: Kubernetes' CHANGELOG of the module's minor,
// containerd's releases/*.toml (in version order, not name order), and a
// module with neither.
func TestReadReleaseNotes(t *testing.T) {
	k8s := fstest.MapFS{
		"CHANGELOG/CHANGELOG-1.37.md": {Data: []byte("<!-- BEGIN MUNGE: GENERATED_TOC -->\n\n- [v1.37.1](#v1371)\n\n" +
			"# v1.37.1\n\n## Changelog since v1.37.0\n\n- Bump golang.org/x/net to v0.49.0 to address CVE-2026-11111 and CVE-2026-2222. ([#1](x))\n" +
			"# v1.37.0\n\n## Changelog since v1.36.0\n\n- Fixed GHSA-abcd-1234-wxyz (CVE-2026-3333).\n" +
			"# v1.37.0-rc.0\n\nnothing\n")},
		"CHANGELOG/CHANGELOG-1.36.md": {Data: []byte("# v1.36.9\n\nCVE-2026-9999\n")},
	}
	got := readReleaseNotes(k8s, "k8s.io/kubernetes", "v1.37.2")
	want := ReleaseNotes{Module: "k8s.io/kubernetes", Version: "v1.37.2", File: "CHANGELOG/CHANGELOG-1.37.md", Releases: []Release{
		{Version: "v1.37.1", CVEs: []string{"CVE-2026-2222", "CVE-2026-11111"}},
		{Version: "v1.37.0", CVEs: []string{"CVE-2026-3333"}, GHSAs: []string{"GHSA-abcd-1234-wxyz"}},
		{Version: "v1.37.0-rc.0"},
	}}
	if !reflect.DeepEqual(got, want) {
		t.Errorf("kubernetes:\n got %+v\nwant %+v", got, want)
	}

	containerd := fstest.MapFS{
		"releases/v2.4.2.toml":  {Data: []byte("preface = \"\"\"\n* [**CVE-2026-95839**](https://github.com/containerd/containerd/security/advisories/GHSA-vwhp-8p66-mq4f)\n\"\"\"\n")},
		"releases/v2.4.10.toml": {Data: []byte("preface = \"\"\"\n* [**GHSA-8647-2jxj-p2rc**](x)\n\"\"\"\n")},
		"releases/v2.4.0.toml":  {Data: []byte("previous = \"v2.3.0\"\n")},
		"releases/README.md":    {Data: []byte("CVE-2020-0000")},
		"releases/vnext.toml":   {Data: []byte("CVE-2020-0001")},
	}
	got = readReleaseNotes(containerd, "github.com/containerd/containerd/v2", "v2.4.10")
	want = ReleaseNotes{Module: "github.com/containerd/containerd/v2", Version: "v2.4.10", File: "releases/", Releases: []Release{
		{Version: "v2.4.10", GHSAs: []string{"GHSA-8647-2jxj-p2rc"}},
		{Version: "v2.4.2", CVEs: []string{"CVE-2026-95839"}, GHSAs: []string{"GHSA-vwhp-8p66-mq4f"}},
		{Version: "v2.4.0"},
	}}
	if !reflect.DeepEqual(got, want) {
		t.Errorf("containerd:\n got %+v\nwant %+v", got, want)
	}

	got = readReleaseNotes(fstest.MapFS{"go.mod": {Data: []byte("module example.com/x\n")}}, "example.com/x", "v1.0.0")
	if got.Problem != "no release notes in the module" || len(got.Releases) != 0 || got.Releases == nil {
		t.Errorf("no notes: %+v", got)
	}
}
