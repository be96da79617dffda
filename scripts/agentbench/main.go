// Command agentbench runs one full drover-agent provisioning (config →
// cleanup) against in-memory fakes and a temporary root, then prints the
// process's peak RSS and CPU time: the figures `make bench` tracks for the
// agent. It links the same agent code as drover-agent.
package main

import (
	"context"
	"encoding/json"
	"fmt"
	"net/url"
	"os"
	"path/filepath"
	"syscall"
	"time"

	"github.com/drover-os/drover/agent/agent"
	"github.com/drover-os/drover/agent/kube"
	"github.com/drover-os/drover/agent/provider"
	"github.com/drover-os/drover/agent/systemd"
)

type prov struct{ data []byte }

func (p prov) Name() string                                   { return "bench" }
func (p prov) UserData(context.Context) ([]byte, bool, error) { return p.data, true, nil }
func (p prov) Facts(context.Context) (provider.Facts, error) {
	return provider.Facts{InstanceID: "i-bench", RegionID: "cn-hangzhou", ZoneID: "cn-hangzhou-h", InstanceType: "ecs.g7.large",
		Hostname: "bench-node", PrivateIPv4: "10.0.2.15", MAC: "52:54:00:12:34:56"}, nil
}

type api struct{}

func (api) GetNode(ctx context.Context, name string) (*kube.Node, error) {
	n := &kube.Node{}
	n.Status.Conditions = []kube.Condition{{Type: "Ready", Status: "True"}}
	return n, nil
}
func (api) SetCondition(context.Context, string, kube.Condition) error  { return nil }
func (api) Cordon(context.Context, string) error                        { return nil }
func (api) Event(context.Context, string, string, string, string) error { return nil }

func main() {
	ca, err := os.ReadFile(os.Args[1]) // a PEM CA (testdata/pki/ca.crt)
	if err != nil {
		fmt.Fprintln(os.Stderr, "usage: agentbench CA.pem")
		os.Exit(2)
	}
	root, _ := os.MkdirTemp("", "agentbench-")
	defer os.RemoveAll(root)
	node := "apiVersion: drover.dev/v1alpha1\nkind: NodeConfig\ncluster:\n  server: https://10.0.2.2:6443\n  bootstrapToken: abcdef.0123456789abcdef\n  caData: |\n"
	for _, l := range splitLines(string(ca)) {
		node += "    " + l + "\n"
	}
	cfg, _ := json.Marshal(map[string]any{"ignition": map[string]any{"version": "3.4.0"},
		"storage": map[string]any{"files": []any{map[string]any{"path": agent.NodeFile, "mode": 0o600,
			"contents": map[string]any{"source": "data:," + url.PathEscape(node)}}}}})
	start := time.Now()
	env := agent.Env{Root: root, Provider: prov{cfg}, Systemd: &systemd.Fake{},
		Network: func(context.Context, string) (agent.Primary, error) {
			return agent.Primary{Link: "eth0", IPv4: "10.0.2.15", Gateway: "10.0.2.2"}, nil
		},
		Prepare: func(string) error { return nil },
		Healthz: func(context.Context) error {
			p := filepath.Join(root, agent.KubeletCert)
			os.MkdirAll(filepath.Dir(p), 0o755)
			return os.WriteFile(p, []byte("cert"), 0o600)
		},
		Kube:    func(string, []byte, string) (agent.NodeAPI, error) { return api{}, nil },
		Console: func(string) {}, Uptime: func() float64 { return 0 }, Poll: time.Millisecond,
	}
	if err := agent.New(env, agent.DefaultDeadlines).Run(context.Background()); err != nil {
		fmt.Fprintln(os.Stderr, "agentbench:", err)
		os.Exit(1)
	}
	var ru syscall.Rusage
	syscall.Getrusage(syscall.RUSAGE_SELF, &ru)
	cpu := time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
	fmt.Printf("agent provisioning run (fakes): wall %s, CPU %s, peak RSS %.1f MiB\n",
		time.Since(start).Round(time.Millisecond), cpu.Round(time.Millisecond), float64(ru.Maxrss)/1024)
}

func splitLines(s string) []string {
	var out []string
	cur := ""
	for _, r := range s {
		if r == '\n' {
			out = append(out, cur)
			cur = ""
			continue
		}
		cur += string(r)
	}
	if cur != "" {
		out = append(out, cur)
	}
	return out
}
