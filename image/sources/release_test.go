package sources

import (
	"slices"
	"testing"

	"github.com/drover-os/drover/image/gomod"
	"github.com/drover-os/drover/image/lock"
	"github.com/drover-os/drover/image/recipe"
)

// TestReleaseKubernetesComponent: release: kubernetes stamps the version
// like the control plane (one gomod.KubernetesLdflags), and the build takes
// the replaces lockGo derived from the lock.
func TestReleaseKubernetesComponent(t *testing.T) {
	g := recipe.GoComponent{Name: "kubelet", Module: "k8s.io/kubernetes", Version: "v1.35.4",
		Package: "k8s.io/kubernetes/cmd/kubelet", Release: "kubernetes", Ldflags: []string{"-X a.b=c"}}
	lg := lock.Go{Name: "kubelet", GoMod: []string{"module drover.local/build/kubelet", "go 1.26",
		"replace k8s.io/api => k8s.io/api v0.35.4", "require k8s.io/kubernetes v1.35.4"}}
	l, err := Locked(g, lg)
	if err != nil {
		t.Fatal(err)
	}
	c := l.Component
	want := []string{"-s -w", "-X k8s.io/component-base/version.gitVersion=v1.35.4",
		"-X k8s.io/component-base/version.gitMajor=1", "-X k8s.io/component-base/version.gitMinor=35", "-X a.b=c"}
	if !slices.Equal(c.Ldflags, want) {
		t.Errorf("ldflags %q, want %q", c.Ldflags, want)
	}
	if want := []gomod.Replace{{Old: "k8s.io/api", New: "k8s.io/api", Version: "v0.35.4"}}; !slices.Equal(c.Replace, want) {
		t.Errorf("replaces %+v, want %+v", c.Replace, want)
	}
	// Without release the recipe's ldflags and replaces are taken as written.
	g.Release = ""
	if l, _ := Locked(g, lg); !slices.Equal(l.Ldflags, []string{"-X a.b=c"}) || len(l.Replace) != 0 {
		t.Errorf("plain component changed: %+v", l.Component)
	}
	// containerd's release stamps the version its CRI reports.
	g = recipe.GoComponent{Name: "containerd", Module: gomod.ContainerdModule, Version: "v2.4.2", Release: "containerd"}
	if l, err := Locked(g, lock.Go{}); err != nil || !slices.Equal(l.Ldflags, []string{"-s -w", "-X github.com/containerd/containerd/v2/version.Version=2.4.2"}) {
		t.Errorf("containerd ldflags %v, %v", l.Ldflags, err)
	}
}
