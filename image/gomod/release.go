package gomod

import (
	"context"
	"fmt"
	"regexp"
)

// Building a program like its project's release build: the version
// ldflags derived from the module version. One mechanism for the recipes'
// components (release: kubernetes, release: containerd) and the local
// control plane (harness/cluster), so that a node and its API server are
// stamped alike.

// The modules whose programs the release presets stamp.
const (
	KubernetesModule = "k8s.io/kubernetes"
	ContainerdModule = "github.com/containerd/containerd/v2"
)

// ReleaseModule is the module a release preset builds ("kubernetes",
// "containerd"), or "" for an unknown preset.
func ReleaseModule(preset string) string {
	return map[string]string{"kubernetes": KubernetesModule, "containerd": ContainerdModule}[preset]
}

// ReleaseLdflags are the linker flags of a release build of the preset's
// project at version.
func ReleaseLdflags(preset, version string) ([]string, error) {
	switch preset {
	case "kubernetes":
		return KubernetesLdflags(version)
	case "containerd":
		return ContainerdLdflags(version)
	}
	return nil, fmt.Errorf("release preset %q: known are kubernetes and containerd", preset)
}

var containerdReleaseRE = regexp.MustCompile(`^v(2\.(0|[1-9][0-9]*)\.(0|[1-9][0-9]*))$`)

// ContainerdLdflags are the linker flags of containerd's release build of
// version (v2.4.2), as its Makefile sets them: stripped, and the version
// (without the v) that `containerd --version` prints and the CRI reports as
// the Node's containerRuntimeVersion (containerd://2.4.2).
func ContainerdLdflags(version string) ([]string, error) {
	m := containerdReleaseRE.FindStringSubmatch(version)
	if m == nil {
		return nil, fmt.Errorf("%q is not a containerd 2.x release version like v2.4.2", version)
	}
	return []string{"-s -w", "-X " + ContainerdModule + "/version.Version=" + m[1]}, nil
}

// kubernetesReleaseRE is a Kubernetes release version; the staging modules'
// version and the version ldflags are derived from its parts.
var kubernetesReleaseRE = regexp.MustCompile(`^v(1)\.(0|[1-9][0-9]*)\.(0|[1-9][0-9]*)$`)

// KubernetesLdflags are the linker flags of a release build of Kubernetes
// version (v1.37.2): stripped, and the version that `kubelet --version`,
// the Node's kubeletVersion and the version skew checks read.
func KubernetesLdflags(version string) ([]string, error) {
	m := kubernetesReleaseRE.FindStringSubmatch(version)
	if m == nil {
		return nil, fmt.Errorf("%q is not a Kubernetes release version like v1.37.2", version)
	}
	return []string{
		"-s -w",
		"-X k8s.io/component-base/version.gitVersion=" + version,
		"-X k8s.io/component-base/version.gitMajor=" + m[1],
		"-X k8s.io/component-base/version.gitMinor=" + m[2],
	}, nil
}

// KubernetesReplaces are the replaces a build of k8s.io/kubernetes at
// version needs: its staging modules pinned to their v0.X.Y release, read
// from the module's go.mod (only the go.mod is fetched).
func KubernetesReplaces(ctx context.Context, env Env, version string) ([]Replace, error) {
	if _, err := KubernetesLdflags(version); err != nil {
		return nil, err
	}
	text, err := ModuleGoMod(ctx, env, KubernetesModule, version)
	if err != nil {
		return nil, err
	}
	reps := StagingReplaces(text, version)
	if len(reps) == 0 {
		return nil, fmt.Errorf("the go.mod of %s@%s has no ./staging replaces to derive", KubernetesModule, version)
	}
	return reps, nil
}
