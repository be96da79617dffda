package cluster

import (
	"context"
	"fmt"
	"io"

	"github.com/drover-os/drover/image/cache"
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

// GinkgoModule is the e2e suite's test framework. Its CLI runs the suite's
// specs in parallel processes (ginkgo --procs), as upstream's
// hack/ginkgo-e2e.sh does: on a TCG node most of a spec's time is waiting
// for the kubelet, so specs run side by side finish far sooner.
const GinkgoModule = "github.com/onsi/ginkgo/v2"

// BuildGinkgo returns the ginkgo CLI at the version Kubernetes version's
// go.mod requires (the CLI refuses a suite built with another major and
// warns on another minor), built from the Go module proxy and cached at
// cacheDir like the control plane.
func BuildGinkgo(ctx context.Context, cacheDir, version string, log, buildLog io.Writer) (string, error) {
	if log == nil {
		log = io.Discard
	}
	store, err := cache.Open(cacheDir)
	if err != nil {
		return "", fmt.Errorf("building ginkgo: %w", err)
	}
	env := gomod.Env{WorkDir: store.TempDir(), Log: buildLog}
	text, err := gomod.ModuleGoMod(ctx, env, gomod.KubernetesModule, version)
	if err != nil {
		return "", fmt.Errorf("building ginkgo for Kubernetes %s: %w; check that the Go module proxy is reachable", version, err)
	}
	v, err := gomod.RequiredVersion(text, GinkgoModule)
	if err != nil {
		return "", fmt.Errorf("building ginkgo for Kubernetes %s: its %w", version, err)
	}
	return buildOne(ctx, env, store, gomod.Component{Name: "ginkgo", Module: GinkgoModule, Version: v,
		Package: GinkgoModule + "/ginkgo"}, log)
}
