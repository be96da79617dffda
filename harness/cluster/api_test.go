package cluster

import (
	"context"
	"errors"
	"reflect"
	"testing"
)

const nodeListJSON = `{"kind":"NodeList","items":[
 {"metadata":{"name":"n1","labels":{"topology.kubernetes.io/zone":"cn-hangzhou-k"}},"spec":{"providerID":"cn-hangzhou.i-1"},
  "status":{"conditions":[{"type":"MemoryPressure","status":"False"},{"type":"Ready","status":"True","reason":"KubeletReady","message":"kubelet is posting ready status"}],
   "capacity":{"cpu":"2","memory":"3022124Ki"},"allocatable":{"cpu":"1880m","memory":"2049324Ki"},
   "nodeInfo":{"kubeletVersion":"v1.37.2","containerRuntimeVersion":"containerd://2.4.2","osImage":"Debian","bootID":"7d2f0c1e-5b6a-4f3e-9a1d-2c8b4e6f0a17"}}},
 {"metadata":{"name":"n2"},"spec":{},"status":{"conditions":[{"type":"Ready","status":"False","reason":"KubeletNotReady","message":"cni plugin not initialized"}]}},
 {"metadata":{"name":"n3"}}]}`

func TestClusterQueries(t *testing.T) {
	f, rc := newFakeAPI(t, func(method, path string, body []byte) (int, string) {
		switch method + " " + path {
		case "GET /api/v1/nodes":
			return 200, nodeListJSON
		case "GET /version":
			return 200, `{"major":"1","minor":"37","gitVersion":"v1.37.2"}`
		case "GET /api/v1/nodes/n9":
			return status(404, "NotFound", `nodes "n9" not found`)
		case "GET /api/v1/nodes/n1":
			return 200, `{"metadata":{"name":"n1"},"status":{"conditions":[{"type":"Ready","status":"True"}]}}`
		case "GET /api/v1/namespaces/default/pods":
			return 200, `{"items":[{"metadata":{"name":"p","namespace":"default"},"spec":{"nodeName":"n1"},"status":{"phase":"Running"}}]}`
		case "GET /api/v1/namespaces/default/pods/p":
			return 200, `{"metadata":{"name":"p","namespace":"default"},"status":{"phase":"Failed","reason":"Evicted","message":"low memory",
				"conditions":[{"type":"DisruptionTarget","status":"True","reason":"TerminationByKubelet"}],
				"containerStatuses":[{"state":{"terminated":{"exitCode":1,"reason":"OOMKilled","message":"{\"sshd\":false}\n"}}},{"state":{"running":{}}}]}}`
		case "POST /api/v1/namespaces/default/pods":
			return 201, string(body)
		}
		return status(404, "NotFound", "no route")
	})
	c := &Cluster{client: rc}
	ctx := context.Background()

	if v, err := c.ServerVersion(ctx); err != nil || v != "v1.37.2" {
		t.Errorf("ServerVersion = %q, %v", v, err)
	}
	nodes, err := c.Nodes(ctx)
	if err != nil || len(nodes) != 3 {
		t.Fatalf("Nodes = %+v, %v", nodes, err)
	}
	if n := nodes[0]; n.Name != "n1" || !n.Ready || n.ProviderID != "cn-hangzhou.i-1" || n.Labels["topology.kubernetes.io/zone"] != "cn-hangzhou-k" || n.ReadyReason != "KubeletReady" ||
		n.KubeletVersion != "v1.37.2" || n.ContainerRuntimeVersion != "containerd://2.4.2" || n.BootID != "7d2f0c1e-5b6a-4f3e-9a1d-2c8b4e6f0a17" ||
		n.Capacity["memory"] != "3022124Ki" || n.Allocatable["cpu"] != "1880m" {
		t.Errorf("n1 = %+v", n)
	}
	if n := nodes[1]; n.Ready || n.ReadyReason != "KubeletNotReady" || n.ReadyMessage != "cni plugin not initialized" {
		t.Errorf("n2 = %+v", n)
	}
	if n := nodes[2]; n.Ready || n.ReadyReason != "" {
		t.Errorf("n3 = %+v", n)
	}
	if n, err := c.Node(ctx, "n1"); err != nil || !n.Ready {
		t.Errorf("Node(n1) = %+v, %v", n, err)
	}
	if _, err := c.Node(ctx, "n9"); !errors.Is(err, ErrNotFound) {
		t.Errorf("Node(n9) err = %v", err)
	}

	pods, err := c.Pods(ctx, "default")
	if err != nil || len(pods) != 1 || !reflect.DeepEqual(pods[0], Pod{Namespace: "default", Name: "p", NodeName: "n1", Phase: "Running", Conditions: map[string]Condition{}}) {
		t.Errorf("Pods = %+v, %v", pods, err)
	}
	p, err := c.Pod(ctx, "default", "p")
	if err != nil || p.Phase != "Failed" || p.Reason != "Evicted" || p.TerminationMessage != `{"sshd":false}` ||
		p.Conditions["DisruptionTarget"].Reason != "TerminationByKubelet" || !reflect.DeepEqual(p.TerminatedReasons, []string{"OOMKilled"}) {
		t.Errorf("Pod = %+v, %v", p, err)
	}
	pod := `{"apiVersion":"v1","kind":"Pod","metadata":{"name":"q"}}`
	if err := c.CreatePod(ctx, "default", []byte(pod)); err != nil {
		t.Fatal(err)
	}
	if _, err := c.Pod(ctx, "kube-system", "nope"); !errors.Is(err, ErrNotFound) {
		t.Errorf("missing pod err = %v", err)
	}
	reqs := f.requests()
	if got, want := reqs[len(reqs)-2], "POST /api/v1/namespaces/default/pods Bearer tok.en "+pod; got != want {
		t.Errorf("create request = %q, want %q", got, want)
	}
}
