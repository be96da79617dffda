package smoke

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"time"

	"github.com/drover-os/drover/harness/conformance"
)

// Suite is Kubernetes' e2e suite and its test images, built by the caller
// (cluster.BuildE2E, conformance.BuildImages), for the conformance subset.
type Suite struct {
	E2E    string
	Ginkgo string // the ginkgo CLI (cluster.BuildGinkgo), to run specs in parallel
	Images []conformance.Image
}

// subsetTimeout bounds the subset's run (ginkgo's own timeout, so it
// still writes its report): ten specs take a few minutes on a TCG node.
const subsetTimeout = 20 * time.Minute

// subsetProcs runs the subset's specs side by side: each is 15-70 s on a
// TCG node, nearly all of it waiting for the kubelet (a probe's period, a
// restart's back-off), so one after another they cost the smoke minutes.
const subsetProcs = 4

// checkConformanceSubset runs conformance.Subset of the e2e suite's
// [NodeConformance] specs against the node on this boot (the environment
// started with Options.Conformance): each must pass.
func (e *Env) checkConformanceSubset(ctx context.Context, r *Report, s *Suite) {
	start := time.Now()
	detail, err := e.runSubset(ctx, s)
	r.add(fmt.Sprintf("Kubernetes e2e [NodeConformance] subset (%d specs: pods, probes, volumes, exec, logs)", len(conformance.Subset)), start, err, detail)
}

func (e *Env) runSubset(ctx context.Context, s *Suite) (string, error) {
	if !e.opts.Conformance || e.kubeletFwd == "" {
		return "", fmt.Errorf("the e2e suite needs the environment started with Options.Conformance (kube-scheduler) and a cluster (the API server reaching the kubelet)")
	}
	work := filepath.Join(e.opts.WorkDir, "conformance")
	if err := os.MkdirAll(work, 0o755); err != nil {
		return "", err
	}
	all, err := conformance.ListSpecs(ctx, s.E2E, work)
	if err != nil {
		return "", err
	}
	names, err := conformance.ResolveSubset(all, conformance.Subset)
	if err != nil {
		return "", err
	}
	res, err := conformance.Run(ctx, conformance.Target{Kubeconfig: e.Cluster.AdminKubeconfig(), Registry: e.Registry, GuestRegistry: e.GuestRegistry()},
		s.Images, conformance.Options{Specs: all, Ginkgo: s.Ginkgo, WorkDir: work, Plan: conformance.Plan{Focus: conformance.FocusOn(names), Timeout: subsetTimeout, Procs: subsetProcs}, Log: e.opts.Log})
	if err != nil {
		return "", err
	}
	detail, err := conformance.JudgeSubset(res, names)
	if err != nil {
		return "", fmt.Errorf("%w\nthe suite's log: %s", err, filepath.Join(work, "e2e.log"))
	}
	return detail, nil
}
