package smoke

import (
	"strings"
	"testing"
	"time"

	"github.com/drover-os/drover/harness/cluster"
	"github.com/drover-os/drover/harness/ecsmeta"
)

func stoppedPod() *cluster.Pod {
	return &cluster.Pod{Name: gracefulPod, Phase: "Failed", Reason: shutdownReason, Message: shutdownMessage,
		TerminationMessage: "stopped by SIGTERM",
		Conditions:         map[string]cluster.Condition{"DisruptionTarget": {Status: "True", Reason: "TerminationByKubelet", Message: shutdownMessage}}}
}

func TestJudgeGracefulStop(t *testing.T) {
	pressed := time.Date(2026, 12, 2, 10, 0, 0, 0, time.UTC)
	off := pressed.Add(40 * time.Second)
	hook := []ecsmeta.Request{{Time: pressed.Add(-time.Minute), Path: "/latest/meta-data/instance-id"},
		{Time: pressed.Add(3040 * time.Millisecond), Path: "/latest/meta-data/drover-smoke/prestop-1"}}
	if d, err := JudgeGracefulStop(stoppedPod(), hook, "prestop-1", "the power button", pressed, off); err != nil {
		t.Fatalf("good observation refused: %v (%s)", err, d)
	} else if want := "hook request 3s after the power button; power-off 40s after it"; !strings.HasPrefix(d, want) {
		t.Errorf("detail %q, want it to start %q", d, want)
	}
	// What kubelet v1.37.2 leaves for a pod whose container exited 0 on
	// SIGTERM: Succeeded, no reason, the condition.
	clean := stoppedPod()
	clean.Phase, clean.Reason, clean.Message = "Succeeded", "", ""
	if d, err := JudgeGracefulStop(clean, hook, "prestop-1", "the power button", pressed, off); err != nil {
		t.Fatalf("clean stop refused: %v (%s)", err, d)
	}
	for _, tc := range []struct {
		name string
		edit func(p *cluster.Pod, reqs *[]ecsmeta.Request)
		want string
	}{
		{"hook never ran", func(_ *cluster.Pod, r *[]ecsmeta.Request) { *r = (*r)[:1] }, "never reached"},
		{"another run's mark", func(_ *cluster.Pod, r *[]ecsmeta.Request) { (*r)[1].Path = "/latest/meta-data/drover-smoke/prestop-12" }, "never reached"},
		{"hook before the button", func(_ *cluster.Pod, r *[]ecsmeta.Request) { (*r)[1].Time = pressed.Add(-time.Second) }, "not between"},
		{"hook after power-off", func(_ *cluster.Pod, r *[]ecsmeta.Request) { (*r)[1].Time = off.Add(time.Second) }, "not between"},
		{"still running (no shutdown manager)", func(p *cluster.Pod, _ *[]ecsmeta.Request) {
			p.Phase, p.Reason, p.Message = "Running", "", ""
		}, "want it ended"},
		{"failed for another reason", func(p *cluster.Pod, _ *[]ecsmeta.Request) { p.Reason = "Evicted" }, "or Failed/Terminated"},
		{"evicted by the kubelet for pressure", func(p *cluster.Pod, _ *[]ecsmeta.Request) {
			p.Conditions["DisruptionTarget"] = cluster.Condition{Status: "True", Reason: "TerminationByKubelet", Message: "The node was low on resource: memory."}
		}, "condition DisruptionTarget"},
		{"no DisruptionTarget", func(p *cluster.Pod, _ *[]ecsmeta.Request) { delete(p.Conditions, "DisruptionTarget") }, "condition DisruptionTarget"},
		{"disrupted by eviction", func(p *cluster.Pod, _ *[]ecsmeta.Request) {
			p.Conditions["DisruptionTarget"] = cluster.Condition{Status: "True", Reason: "EvictionByEvictionAPI"}
		}, "condition DisruptionTarget"},
		{"killed, not stopped", func(p *cluster.Pod, _ *[]ecsmeta.Request) { p.TerminationMessage = "" }, "SIGTERM"},
	} {
		p := stoppedPod()
		reqs := append([]ecsmeta.Request(nil), hook...)
		tc.edit(p, &reqs)
		if _, err := JudgeGracefulStop(p, reqs, "prestop-1", "the power button", pressed, off); err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("%s: %v, want an error with %q", tc.name, err, tc.want)
		}
	}
}

func TestJudgeAllocatable(t *testing.T) {
	// 2 CPUs, MemTotal 3000 MiB: 70m+50m reserved; 750+100 MiB reserved
	// and 100 MiB eviction.
	good := func() *cluster.Node {
		return &cluster.Node{Name: "n",
			Capacity:    map[string]string{"cpu": "2", "memory": "3072000Ki", "pods": "110"},
			Allocatable: map[string]string{"cpu": "1880m", "memory": "2099200Ki", "pods": "110"}}
	}
	if d, err := JudgeAllocatable(good()); err != nil {
		t.Fatalf("good node refused: %v (%s)", err, d)
	}
	for _, tc := range []struct {
		name string
		edit func(n *cluster.Node)
		want string
	}{
		{"nothing reserved", func(n *cluster.Node) { n.Allocatable = n.Capacity }, "not below capacity"},
		{"no CPU reserved", func(n *cluster.Node) { n.Allocatable["cpu"] = "2" }, "not below capacity"},
		{"no memory reserved", func(n *cluster.Node) { n.Allocatable["memory"] = "3072000Ki" }, "not below capacity"},
		{"memory by another formula", func(n *cluster.Node) { n.Allocatable["memory"] = "2201600Ki" }, "allocatable memory"},
		{"eviction threshold left out", func(n *cluster.Node) { n.Allocatable["memory"] = "2201600Ki" }, "want 2149580800 bytes"},
		{"cpu by another formula", func(n *cluster.Node) { n.Allocatable["cpu"] = "1900m" }, "allocatable cpu 1900m, want 1880m"},
		{"no capacity", func(n *cluster.Node) { n.Capacity = nil }, "reports no cpu"},
		{"no allocatable memory", func(n *cluster.Node) { delete(n.Allocatable, "memory") }, "reports no memory"},
		{"zero capacity", func(n *cluster.Node) { n.Capacity["memory"] = "0" }, "no size to reserve for"},
		{"bad quantity", func(n *cluster.Node) { n.Allocatable["cpu"] = "two" }, "quantities must match"},
	} {
		n := good()
		tc.edit(n)
		if _, err := JudgeAllocatable(n); err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("%s: %v, want an error with %q", tc.name, err, tc.want)
		}
	}
}

func TestJudgeSpotStop(t *testing.T) {
	notice := time.Date(2026, 12, 2, 8, 4, 0, 0, time.UTC)
	off := notice.Add(-3 * time.Minute)
	msg := "ECS reclaims this spot instance at 2026-12-02T08:04:00Z (metadata instance/spot/termination-time): node cordoned, shutting down gracefully now"
	good := &cluster.Node{Unschedulable: true, Taints: []string{"node.kubernetes.io/unschedulable:NoSchedule"}}
	evs := []cluster.Event{{Reason: "SpotInterruption", Source: "drover-agent", Message: msg}}
	if _, err := JudgeSpotStop(good, evs, notice, off); err != nil {
		t.Fatalf("good stop judged bad: %v", err)
	}
	for _, tc := range []struct {
		name string
		n    *cluster.Node
		evs  []cluster.Event
		off  time.Time
		want string
	}{
		{"not cordoned", &cluster.Node{Taints: good.Taints}, evs, off, "not cordoned"},
		{"no taint", &cluster.Node{Unschedulable: true}, evs, off, "lack node.kubernetes.io/unschedulable:NoSchedule"},
		{"no Event", good, nil, off, "no SpotInterruption Event"},
		{"Event from someone else", good, []cluster.Event{{Reason: "SpotInterruption", Source: "kubelet", Message: msg}}, off, "no SpotInterruption Event"},
		{"Event for another time", good, []cluster.Event{{Reason: "SpotInterruption", Source: "drover-agent", Message: strings.Replace(msg, "08:04", "09:04", 1)}}, off, "does not name the notice's time"},
		{"off too late", good, evs, notice.Add(time.Second), "not before the notice's time"},
	} {
		if _, err := JudgeSpotStop(tc.n, tc.evs, notice, tc.off); err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("%s: %v, want %q", tc.name, err, tc.want)
		}
	}
}

// TestJudgeShutdownInhibitor: the kubelet's delay lock on shutdown, as
// systemd-inhibit --list prints it, holds; a block lock, another program's
// delay lock or none does not.
func TestJudgeShutdownInhibitor(t *testing.T) {
	const header = "WHO            UID USER PID COMM            WHAT     WHY                                         MODE\n"
	for _, tc := range []struct {
		list string
		ok   bool
	}{
		{header + "kubelet        0   root 423 kubelet         shutdown Kubelet needs time for critical node shutdown delay\n\n1 inhibitors listed.\n", true},
		{header + "kubelet        0   root 423 kubelet         shutdown Kubelet needs time for critical node shutdown block\n\n1 inhibitors listed.\n", false},
		{header + "ModemManager   0   root 99  ModemManager    sleep    ModemManager needs to reset devices         delay\n\n1 inhibitors listed.\n", false},
		{"No inhibitors.\n", false},
	} {
		if err := JudgeShutdownInhibitor(tc.list); (err == nil) != tc.ok {
			t.Errorf("%q: %v, want ok %v", tc.list, err, tc.ok)
		}
	}
}
