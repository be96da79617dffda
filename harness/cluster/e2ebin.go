package cluster

import (
	"context"
	"fmt"
	"io"

	"github.com/drover-os/drover/image/gomod"
)

// E2EPackage is the package whose test binary is Kubernetes' end-to-end
// suite (test/e2e/e2e_test.go); upstream ships it as e2e.test.
const E2EPackage = "k8s.io/kubernetes/test/e2e"

// e2eComponent is the e2e suite of Kubernetes version as a gomod test
// component: built like the control plane (the staging modules replaced by
// their published versions, the version stamped, so the framework's skew
// checks and its own logs see the real release).
func e2eComponent(version string, replaces []gomod.Replace) (gomod.Component, error) {
	ldflags, err := gomod.KubernetesLdflags(version)
	if err != nil {
		return gomod.Component{}, fmt.Errorf("e2e suite version: %w; use the recipe's kubelet version", err)
	}
	return gomod.Component{
		Name:    "e2e.test",
		Module:  "k8s.io/kubernetes",
		Version: version,
		Package: E2EPackage,
		Replace: replaces,
		Ldflags: ldflags,
		Test:    true,
	}, nil
}

// BuildE2E returns Kubernetes' e2e test binary (e2e.test) of version for
// this host, built with `go test -c` from the Go module proxy into the
// cache at cacheDir the first time (it is large: tens of minutes on two
// cores) and served from it afterwards, under the same kind of key as the
// control plane's binaries.
func BuildE2E(ctx context.Context, cacheDir, version string, log, buildLog io.Writer) (string, error) {
	mk := func(r []gomod.Replace) (gomod.Component, error) { return e2eComponent(version, r) }
	return buildKubernetes(ctx, cacheDir, version, mk, log, buildLog)
}

// BuildKubernetesProgram builds the main package pkg of k8s.io/kubernetes
// at version (e.g. test/images/agnhost) for linux/amd64 like the control
// plane's programs, cached at cacheDir, and returns the binary's path.
func BuildKubernetesProgram(ctx context.Context, cacheDir, version, name, pkg string, log, buildLog io.Writer) (string, error) {
	mk := func(r []gomod.Replace) (gomod.Component, error) {
		ldflags, err := gomod.KubernetesLdflags(version)
		if err != nil {
			return gomod.Component{}, err
		}
		return gomod.Component{Name: name, Module: "k8s.io/kubernetes", Version: version, Package: pkg,
			Replace: r, Ldflags: ldflags}, nil
	}
	return buildKubernetes(ctx, cacheDir, version, mk, log, buildLog)
}
