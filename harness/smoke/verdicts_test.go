package smoke

import (
	"strings"
	"testing"

	"github.com/drover-os/drover/agent/nodeconfig"
	"github.com/drover-os/drover/agent/status"
	"github.com/drover-os/drover/agent/userdata"
	"github.com/drover-os/drover/harness/cluster"
	"github.com/drover-os/drover/harness/ecsmeta"
	"github.com/drover-os/drover/internal/secretscan"
	"github.com/drover-os/drover/nodecontract"
)

// Each smoke verdict is a function of what was observed; each table lists
// observations that must fail.

func goodNode() (*cluster.Node, ecsmeta.Instance) {
	m := ecsmeta.DefaultInstance()
	return &cluster.Node{Name: "n", ProviderID: m.RegionID + "." + m.InstanceID, Labels: map[string]string{
		"topology.kubernetes.io/region": m.RegionID, "topology.kubernetes.io/zone": m.ZoneID,
		"node.kubernetes.io/instance-type": m.InstanceType, "kubernetes.io/arch": "amd64"},
		KubeletVersion: "v1.37.2", ContainerRuntimeVersion: "containerd://2.4.2"}, m
}

func TestJudgeNode(t *testing.T) {
	n, m := goodNode()
	if err := JudgeNode(n, m, "amd64"); err != nil {
		t.Fatalf("good node: %v", err)
	}
	for name, bad := range map[string]func(n *cluster.Node, m *ecsmeta.Instance, arch *string){
		"no providerID":    func(n *cluster.Node, _ *ecsmeta.Instance, _ *string) { n.ProviderID = "" },
		"instance id only": func(n *cluster.Node, m *ecsmeta.Instance, _ *string) { n.ProviderID = m.InstanceID },
		"another region": func(n *cluster.Node, _ *ecsmeta.Instance, _ *string) {
			n.Labels["topology.kubernetes.io/region"] = "cn-beijing"
		},
		"no zone label": func(n *cluster.Node, _ *ecsmeta.Instance, _ *string) { delete(n.Labels, "topology.kubernetes.io/zone") },
		"instance type": func(n *cluster.Node, _ *ecsmeta.Instance, _ *string) {
			n.Labels["node.kubernetes.io/instance-type"] = "ecs.g6.large"
		},
		"wrong arch": func(_ *cluster.Node, _ *ecsmeta.Instance, a *string) { *a = "arm64" },
		"metadata without zone": func(n *cluster.Node, m *ecsmeta.Instance, _ *string) {
			m.ZoneID = ""
			n.Labels["topology.kubernetes.io/zone"] = ""
		},
	} {
		n, m := goodNode()
		arch := "amd64"
		bad(n, &m, &arch)
		if err := JudgeNode(n, m, arch); err == nil {
			t.Errorf("%s: passed", name)
		}
	}
}

func TestJudgeVersions(t *testing.T) {
	want := Versions{Kubelet: "v1.37.2", Containerd: "v2.4.2"}
	n, _ := goodNode()
	if _, err := JudgeVersions(n, "v1.37.2", want); err != nil {
		t.Fatalf("good: %v", err)
	}
	for name, c := range map[string]struct {
		kubelet, runtime string
		want             Versions
	}{
		"older kubelet":          {"v1.37.1", "containerd://2.4.2", want},
		"runtime with a v":       {"v1.37.2", "containerd://v2.4.2", want},
		"another runtime":        {"v1.37.2", "cri-o://1.32.0", want},
		"nothing posted":         {"", "", want},
		"no manifest versions":   {"v1.37.2", "containerd://2.4.2", Versions{}},
		"no containerd recorded": {"v1.37.2", "containerd://2.4.2", Versions{Kubelet: "v1.37.2"}},
	} {
		n.KubeletVersion, n.ContainerRuntimeVersion = c.kubelet, c.runtime
		if _, err := JudgeVersions(n, "v1.37.2", c.want); err == nil {
			t.Errorf("%s: passed", name)
		}
	}
}

func TestJudgePod(t *testing.T) {
	if done, msg, err := JudgePod(&cluster.Pod{Name: "p", NodeName: "n", Phase: "Succeeded", TerminationMessage: "{}"}, "n"); !done || err != nil || msg != "{}" {
		t.Fatalf("succeeded: %v %q %v", done, msg, err)
	}
	for _, ph := range []string{"", "Pending", "Running"} {
		if done, _, _ := JudgePod(&cluster.Pod{Name: "p", NodeName: "n", Phase: ph}, "n"); done {
			t.Errorf("phase %q taken as done", ph)
		}
	}
	for name, p := range map[string]*cluster.Pod{
		"failed":            {Name: "p", NodeName: "n", Phase: "Failed", Reason: "Error"},
		"ran elsewhere":     {Name: "p", NodeName: "other", Phase: "Succeeded"},
		"pending elsewhere": {Name: "p", NodeName: "other", Phase: "Pending"},
	} {
		if done, _, err := JudgePod(p, "n"); !done || err == nil {
			t.Errorf("%s: done %v, err %v", name, done, err)
		}
	}
}

func TestJudgeVarScan(t *testing.T) {
	if err := JudgeVarScan(&VarScan{Files: 40}); err != nil {
		t.Fatalf("clean scan: %v", err)
	}
	for name, sc := range map[string]*VarScan{
		"a file holds it":       {Files: 40, Hits: []secretscan.Hit{{Path: "/var/lib/drover/config.ign", Where: "plain at 10"}}},
		"a free block holds it": {Files: 40, Raw: []int64{4096}, RawOwners: []string{"offset 4096: <block not found>"}},
		"both":                  {Files: 40, Hits: []secretscan.Hit{{Path: "/var/x"}}, Raw: []int64{1}},
		"nothing scanned":       {},
		"no scan":               nil,
	} {
		if err := JudgeVarScan(sc); err == nil {
			t.Errorf("%s: passed", name)
		}
	}
}

func TestJudgeDump(t *testing.T) {
	if err := JudgeDump(40, true, true); err != nil {
		t.Errorf("a dump with the stored config: %v", err)
	}
	if err := JudgeDump(40, false, false); err != nil {
		t.Errorf("a refused config's dump: %v", err)
	}
	for name, c := range map[string]struct {
		files             int
		hasStored, stored bool
	}{
		"empty dump":                    {0, false, false},
		"empty dump, stored wanted":     {0, false, true},
		"stored config missing from it": {40, false, true},
	} {
		if err := JudgeDump(c.files, c.hasStored, c.stored); err == nil {
			t.Errorf("%s: passed", name)
		}
	}
}

func TestJudgeRefusal(t *testing.T) {
	const want = `$.storage.files[3].path: "/usr/local/bin/not-allowed"`
	line := "drover-agent: [  30.1s] apply: FAILED: ignition config refused: " + want + " is outside /etc and /var"
	if err := JudgeRefusalLine("apply: FAILED", line, want); err != nil {
		t.Fatalf("good line: %v", err)
	}
	for name, c := range map[string][2]string{
		"joined instead":  {"] ready: ok", line},
		"another refusal": {"apply: FAILED", "drover-agent: [  30.1s] apply: FAILED: $.storage.files[2].path: \"/usr/x\""},
		"no line":         {"apply: FAILED", ""},
		"another phase":   {"apply: FAILED", strings.Replace(line, "apply: FAILED", "config: FAILED", 1)},
	} {
		if err := JudgeRefusalLine(c[0], c[1], want); err == nil {
			t.Errorf("console %s: passed", name)
		}
	}
	if err := JudgeRefusalStatus(&status.Status{State: "failed", Error: "apply: " + want}, want); err != nil {
		t.Fatalf("good status: %v", err)
	}
	for name, st := range map[string]*status.Status{
		"joined":           {State: "joined", Error: want},
		"failed elsewhere": {State: "failed", Error: "network: no route"},
		"no status":        nil,
	} {
		if err := JudgeRefusalStatus(st, want); err == nil {
			t.Errorf("status %s: passed", name)
		}
	}
}

func TestJudgeIdentity(t *testing.T) {
	s, err := userdata.Load("../../testdata/userdata/pool.yaml")
	if err != nil {
		t.Fatal(err)
	}
	ud, err := userdata.Render(s)
	if err != nil {
		t.Fatal(err)
	}
	d, err := nodecontract.ConfigDigest(ud)
	if err != nil {
		t.Fatal(err)
	}
	good := func() *cluster.Node {
		n, _ := goodNode()
		n.Labels[nodeconfig.LabelBuildID] = "0123456789abcdef"
		n.Labels[nodeconfig.LabelNodeConfig] = nodecontract.ConfigLabel(d)
		return n
	}
	if _, err := JudgeIdentity(good(), "0123456789abcdef", ud); err != nil {
		t.Fatalf("good node: %v", err)
	}
	other := *s
	other.Labels = map[string]string{"pool": "b"}
	otherUD, err := userdata.Render(&other)
	if err != nil {
		t.Fatal(err)
	}
	for name, c := range map[string]struct {
		build string
		ud    []byte
		edit  func(*cluster.Node)
	}{
		"another build":        {build: "fedcba9876543210", ud: ud},
		"another config":       {build: "0123456789abcdef", ud: otherUD},
		"no build label":       {build: "0123456789abcdef", ud: ud, edit: func(n *cluster.Node) { delete(n.Labels, nodeconfig.LabelBuildID) }},
		"full digest as label": {build: "0123456789abcdef", ud: ud, edit: func(n *cluster.Node) { n.Labels[nodeconfig.LabelNodeConfig] = d }},
		"no build in manifest": {build: "", ud: ud},
	} {
		n := good()
		if c.edit != nil {
			c.edit(n)
		}
		if _, err := JudgeIdentity(n, c.build, c.ud); err == nil {
			t.Errorf("%s: passed", name)
		}
	}
}
