package outdated

import (
	"bytes"
	"strings"
	"testing"

	"github.com/drover-os/drover/image/debian"
	"github.com/drover-os/drover/image/lock"
)

func TestCheck(t *testing.T) {
	l := &lock.Lock{
		Debs: []lock.Deb{
			{Name: "runc", Version: "1.1.15+ds1-2+b4", Arch: "amd64", Size: 3, SHA256: "aa", Suite: "trixie", Path: "pool/main/r/runc/r.deb", Line: 10},
			{Name: "libc6", Version: "2.41-12", Arch: "amd64", Size: 5, SHA256: "bb", Suite: "trixie", Path: "pool/main/g/glibc/l.deb", Line: 11},
			{Name: "tzdata", Version: "2025b-4", Arch: "all", Size: 7, SHA256: "cc", Suite: "trixie-updates", Path: "pool/main/t/tzdata/t.deb", Line: 12},
			{Name: "gone", Version: "1", Arch: "amd64", Size: 1, SHA256: "dd", Suite: "trixie", Path: "pool/main/g/gone/g.deb", Line: 13},
		},
		Go: []lock.Go{
			{Name: "kubelet", Module: "k8s.io/kubernetes", Version: "v1.37.2"},
			{Name: "containerd", Module: "github.com/containerd/containerd/v2", Version: "v2.4.2"},
			{Name: "containerd-shim-runc-v2", Module: "github.com/containerd/containerd/v2", Version: "v2.4.2"},
		},
	}
	pkgs := []debian.Package{
		{Name: "runc", Version: "1.1.15+ds1-2+b4", Architecture: "amd64", Size: 3, SHA256: "aa", Filename: "pool/main/r/runc/r.deb", Suite: "trixie"},
		{Name: "runc", Version: "1.1.15+ds1-2+deb13u1", Architecture: "amd64", Suite: "trixie-security", Source: "runc"},
		// An arm64 build of a newer version is not an update of amd64's.
		{Name: "libc6", Version: "2.41-13", Architecture: "arm64", Suite: "trixie-updates"},
		{Name: "libc6", Version: "2.41-12", Architecture: "amd64", Size: 5, SHA256: "bb", Filename: "pool/main/g/glibc/l.deb", Suite: "trixie"},
		// The same version listed by the updates suite with another hash.
		{Name: "libc6", Version: "2.41-12", Architecture: "amd64", Size: 6, SHA256: "b0", Filename: "pool/main/g/glibc/l.deb", Suite: "trixie-updates"},
		{Name: "tzdata", Version: "2025b-4", Architecture: "all", Size: 7, SHA256: "cc", Filename: "pool/main/t/tzdata/other.deb", Suite: "trixie-updates"},
		{Name: "tzdata", Version: "2025b-3", Architecture: "all", Suite: "trixie"},
	}
	versions := map[string][]string{
		"k8s.io/kubernetes":                   {"v1.36.9", "v1.37.2", "v1.37.3", "v1.37.4-rc.0", "v1.37.4", "v1.38.0"},
		"github.com/containerd/containerd/v2": {"v2.4.1", "v2.4.2", "v2.5.0"},
	}
	r := Check(l, pkgs, versions)
	if len(r.Packages) != 1 || r.Packages[0] != (Package{Name: "runc", Arch: "amd64", Locked: "1.1.15+ds1-2+b4", LockSuite: "trixie",
		Newer: "1.1.15+ds1-2+deb13u1", Suite: "trixie-security", Security: true, Source: "runc"}) {
		t.Errorf("packages: %+v", r.Packages)
	}
	if len(r.Go) != 1 || r.Go[0].Name != "kubelet" || r.Go[0].Newer != "v1.37.4" || strings.Join(r.Go[0].Between, " ") != "v1.37.3 v1.37.4" {
		t.Errorf("go: %+v", r.Go)
	}
	if strings.Join(r.Gone, ",") != "gone 1" {
		t.Errorf("gone: %v", r.Gone)
	}
	var got []string
	for _, m := range r.Mismatches {
		got = append(got, m.Detail())
	}
	want := []string{
		"deb libc6 2.41-12 amd64: sha256 bb, but the signed trixie-updates index says b0",
		"deb libc6 2.41-12 amd64: size 5, but the signed trixie-updates index says 6",
		"deb tzdata 2025b-4 all: path pool/main/t/tzdata/t.deb, but the signed trixie-updates index says pool/main/t/tzdata/other.deb",
	}
	if strings.Join(got, "\n") != strings.Join(want, "\n") || r.Mismatches[0].Line != 11 || r.Mismatches[2].Line != 12 {
		t.Errorf("mismatches:\n%s\nwant\n%s", strings.Join(got, "\n"), strings.Join(want, "\n"))
	}
	if !r.Outdated(false) || !r.Outdated(true) || r.Security() != 1 {
		t.Errorf("outdated %v / security-only %v, security %d", r.Outdated(false), r.Outdated(true), r.Security())
	}
	// Without the security update only the kubelet's patch release is
	// left: outdated, but not for --security-only.
	r = Check(l, pkgs[:1], versions)
	if !r.Outdated(false) || r.Outdated(true) {
		t.Errorf("Go only: outdated %v / security-only %v", r.Outdated(false), r.Outdated(true))
	}
	var b bytes.Buffer
	if err := r.Text(&b, "r.yaml.lock", []string{"trixie"}, true); err != nil || b.String() != "r.yaml.lock is current: no security update in trixie\n" {
		t.Errorf("text: %q %v", b.String(), err)
	}
}
