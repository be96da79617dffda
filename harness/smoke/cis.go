package smoke

import (
	"context"
	"encoding/json"
	"fmt"
	"strings"
	"time"

	"github.com/drover-os/drover/harness/cis"
	"github.com/drover-os/drover/harness/registry"
)

// CISAccount is the service account of the CIS probe pod: the kubelet
// lets it read /configz (nodes/configz, checked by the kubelet with the
// API server's RBAC as for the API server's node proxy), and nothing else.
const CISAccount = "drover-cis"

// cisRBAC is the account, a ClusterRole with get on nodes/configz and its
// binding, as collection, name, object.
func cisRBAC() []struct {
	collection, name string
	obj              map[string]any
} {
	const role = "drover:cis-configz"
	subject := map[string]any{"kind": "ServiceAccount", "name": CISAccount, "namespace": "default"}
	return []struct {
		collection, name string
		obj              map[string]any
	}{
		{"/api/v1/namespaces/default/serviceaccounts", CISAccount, map[string]any{
			"apiVersion": "v1", "kind": "ServiceAccount", "metadata": map[string]any{"name": CISAccount, "namespace": "default"}}},
		{"/apis/rbac.authorization.k8s.io/v1/clusterroles", role, map[string]any{
			"apiVersion": "rbac.authorization.k8s.io/v1", "kind": "ClusterRole", "metadata": map[string]any{"name": role},
			"rules": []any{map[string]any{"apiGroups": []string{""}, "resources": []string{"nodes/configz"}, "verbs": []string{"get"}}}}},
		{"/apis/rbac.authorization.k8s.io/v1/clusterrolebindings", role, map[string]any{
			"apiVersion": "rbac.authorization.k8s.io/v1", "kind": "ClusterRoleBinding", "metadata": map[string]any{"name": role},
			"roleRef":  map[string]any{"apiGroup": "rbac.authorization.k8s.io", "kind": "ClusterRole", "name": role},
			"subjects": []any{subject}}},
	}
}

// ProbeCIS runs the probe's cis mode on the node as CISAccount.
func (e *Env) ProbeCIS(ctx context.Context, in *Instance, name string) (*cis.Evidence, string, error) {
	for _, o := range cisRBAC() {
		if err := e.Cluster.CreateOrReplace(ctx, o.collection, o.name, o.obj); err != nil {
			return nil, "", err
		}
	}
	// A pod of its own, not an exec in the host probe pod (probe.go): it
	// runs as CISAccount, whose token it shows the kubelet's /configz.
	spec := podSpec(in.NodeName, e.GuestRegistry()+"/"+registry.ProbeImage, []string{"cis"}, true)
	spec["serviceAccountName"] = CISAccount
	msg, err := e.runPodSpec(ctx, in, name, spec)
	if err != nil {
		return nil, msg, err
	}
	var ev cis.Evidence
	if err := json.Unmarshal([]byte(msg), &ev); err != nil {
		return nil, msg, fmt.Errorf("probe cis report %q: %w", msg, err)
	}
	return &ev, msg, nil
}

// JudgeCIS turns the probe's evidence into the report's lines: one summary
// (failing when a check fails, naming each) and one per failed check.
func JudgeCIS(ev *cis.Evidence) (summary string, failed []cis.Result, err error) {
	rs := cis.Judge(*ev)
	line, failed := cis.Summary(rs)
	var probs []string
	for _, f := range failed {
		probs = append(probs, f.Benchmark+" "+f.ID+" FAIL: "+f.Evidence)
	}
	if len(ev.Errors) > 0 {
		probs = append(probs, "the probe could not read: "+strings.Join(ev.Errors, "; "))
	}
	if len(probs) > 0 {
		return line, failed, fmt.Errorf("%s: %s", line, strings.Join(probs, " | "))
	}
	return line, nil, nil
}

// checkCIS judges the node against the CIS ACK 1.0 worker-node checks
// (harness/cis) on evidence read on the running node.
func (e *Env) checkCIS(ctx context.Context, r *Report, in *Instance, pod string) {
	s := time.Now()
	sctx, cancel := context.WithTimeout(ctx, 10*time.Minute)
	defer cancel()
	ev, _, err := e.ProbeCIS(sctx, in, pod)
	if err != nil {
		r.add("CIS ACK 1.0 worker node", s, err, "")
		return
	}
	line, failed, err := JudgeCIS(ev)
	// Every check's status, failed or not: one run shows what the rest
	// of the node passed.
	var ids []string
	for _, res := range cis.Judge(*ev) {
		// ACK's IDs bare; the CIS Kubernetes checks it lacks named with
		// their benchmark (both have a 4.2.10).
		id := res.ID
		if res.Benchmark != cis.ACK {
			id = res.Benchmark + " " + id
		}
		ids = append(ids, id+" "+string(res.Status))
	}
	all := " (" + strings.Join(ids, ", ") + ")"
	if err != nil {
		err = fmt.Errorf("%w%s", err, all)
	}
	r.add("CIS ACK 1.0 worker node", s, err, line+all)
	for _, f := range failed {
		r.add(fmt.Sprintf("%s %s: %s", f.Benchmark, f.ID, f.Title), s, fmt.Errorf("%s: %s", f.Status, f.Evidence), "")
	}
}
