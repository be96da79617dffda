package cluster

import (
	"context"
	"fmt"
	"io"
	"runtime"

	"github.com/drover-os/drover/image/cache"
	"github.com/drover-os/drover/image/gomod"
)

// schedulerComponent is kube-scheduler of Kubernetes version, built like
// the other control-plane programs (components).
func schedulerComponent(version string, replaces []gomod.Replace) (gomod.Component, error) {
	ldflags, err := gomod.KubernetesLdflags(version)
	if err != nil {
		return gomod.Component{}, fmt.Errorf("control plane version: %w; use the recipe's kubelet version", err)
	}
	return gomod.Component{Name: "kube-scheduler", Module: "k8s.io/kubernetes", Version: version,
		Package: "k8s.io/kubernetes/cmd/kube-scheduler", Replace: replaces, Ldflags: ldflags}, nil
}

// BuildScheduler builds (or finds in the cache at cacheDir) kube-scheduler
// of Kubernetes version, as Start does with Config.Scheduler, so a caller
// can build it before it needs the cluster.
func BuildScheduler(ctx context.Context, cacheDir, version string, log, buildLog io.Writer) (string, error) {
	mk := func(r []gomod.Replace) (gomod.Component, error) { return schedulerComponent(version, r) }
	return buildKubernetes(ctx, cacheDir, version, mk, log, buildLog)
}

// buildKubernetes builds (or finds in the cache at cacheDir) the component
// mk makes of k8s.io/kubernetes at version, with its staging replaces.
func buildKubernetes(ctx context.Context, cacheDir, version string, mk func([]gomod.Replace) (gomod.Component, error), log, buildLog io.Writer) (string, error) {
	if log == nil {
		log = io.Discard
	}
	if runtime.GOOS != "linux" {
		return "", fmt.Errorf("building for the local control plane: it runs on Linux only, not %s", runtime.GOOS)
	}
	probe, err := mk(nil)
	if err != nil {
		return "", err
	}
	store, err := cache.Open(cacheDir)
	if err != nil {
		return "", fmt.Errorf("building %s: %w", probe.Name, err)
	}
	env := gomod.Env{WorkDir: store.TempDir(), Log: buildLog}
	replaces, err := gomod.KubernetesReplaces(ctx, env, version)
	if err != nil {
		return "", fmt.Errorf("building %s %s: %w; check that the Go module proxy is reachable", probe.Name, version, err)
	}
	c, err := mk(replaces)
	if err != nil {
		return "", err
	}
	return buildOne(ctx, env, store, c, log)
}

// schedulerArgs are kube-scheduler's flags: its own identity
// (system:kube-scheduler, bound by the API server's bootstrap RBAC), no
// leader election (one scheduler), health served on loopback at a port of
// its own with a certificate of the cluster CA, so Start can wait for it.
func schedulerArgs(l layout, port int) []string {
	return append(componentArgs(l, "scheduler", port), "--leader-elect=false", "--profiling=false")
}

// startScheduler runs kube-scheduler until it is healthy.
func (c *Cluster) startScheduler(ctx context.Context) (err error) {
	c.scheduler, err = c.startComponent(ctx, "kube-scheduler", schedulerArgs)
	return err
}
