package smoke

import (
	"strings"
	"testing"
	"time"

	"github.com/drover-os/drover/harness/cluster"
)

func TestJudgeLinkLoss(t *testing.T) {
	down := time.Date(2026, 12, 3, 8, 0, 0, 0, time.UTC)
	up := down.Add(linkDownFor)
	ev := cluster.Event{Type: "Warning", Reason: "NICLinkDown", Source: "drover-agent", InvolvedKind: "Node", InvolvedName: "n",
		Message: "eth0 (52:54:00:12:34:56): carrier lost at 2026-12-03T08:00:01Z (IFF_LOWER_UP cleared while the link is up)"}
	back := cluster.Condition{Status: "False", Reason: "NICLinksUp", Message: "eth0: carrier back after 19s", LastTransitionTime: up.Add(3 * time.Second)}
	node := func(c cluster.Condition) *cluster.Node {
		return &cluster.Node{Name: "n", Ready: true, Conditions: map[string]cluster.Condition{"NICLinkDown": c}}
	}
	if _, err := JudgeLinkLoss(node(back), []cluster.Event{ev}, down, up); err != nil {
		t.Fatal(err)
	}
	// The guest's clock may be a few seconds off the host's: a loss dated
	// just before the pull, or just after the return, still counts.
	for _, at := range []string{"07:59:57", "08:00:23"} {
		skewed := ev
		skewed.Message = strings.Replace(ev.Message, "08:00:01", at, 1)
		if _, err := JudgeLinkLoss(node(back), []cluster.Event{skewed}, down, up); err != nil {
			t.Errorf("loss dated %s (the guest's clock a few seconds off): %v", at, err)
		}
	}
	late := ev
	late.Message = strings.Replace(ev.Message, "08:00:01", "08:05:00", 1)
	otherNIC := ev
	otherNIC.Message = strings.Replace(ev.Message, "52:54:00:12:34:56", "52:54:00:aa:bb:cc", 1)
	never := back
	never.LastTransitionTime = down.Add(-time.Hour)
	notReady := node(back)
	notReady.Ready = false
	for name, c := range map[string]struct {
		n    *cluster.Node
		evs  []cluster.Event
		want string
	}{
		"no event":      {node(back), nil, "no NICLinkDown Event"},
		"another NIC":   {node(back), []cluster.Event{otherNIC}, "no NICLinkDown Event"},
		"wrong time":    {node(back), []cluster.Event{late}, "outside the link's time down"},
		"still true":    {node(cluster.Condition{Status: "True", Reason: "CarrierLost"}), []cluster.Event{ev}, "NICLinkDown is True"},
		"never true":    {node(never), []cluster.Event{ev}, "never turned True"},
		"no condition":  {&cluster.Node{Name: "n", Ready: true}, []cluster.Event{ev}, "no NICLinkDown condition"},
		"node notready": {notReady, []cluster.Event{ev}, "not Ready"},
	} {
		_, err := JudgeLinkLoss(c.n, c.evs, down, up)
		if err == nil || !strings.Contains(err.Error(), c.want) {
			t.Errorf("%s: %v, want an error with %q", name, err, c.want)
		}
	}
}

func TestJudgeRestartReport(t *testing.T) {
	msg := "containerd.service restarted 5 times in the last 20m0s (NRestarts=5 since boot)"
	on := cluster.Condition{Status: "True", Reason: "FrequentContainerdRestart", Message: msg}
	ev := cluster.Event{Type: "Warning", Reason: "FrequentContainerdRestart", Source: "drover-agent", Message: msg}
	node := func(c cluster.Condition, ready bool) *cluster.Node {
		return &cluster.Node{Name: "n", Ready: ready, Conditions: map[string]cluster.Condition{"FrequentContainerdRestart": c}}
	}
	if _, err := JudgeRestartReport(node(on, true), []cluster.Event{ev}); err != nil {
		t.Fatal(err)
	}
	kubelet := ev
	kubelet.Message = strings.Replace(msg, "containerd", "kubelet", 1)
	for name, c := range map[string]struct {
		n    *cluster.Node
		evs  []cluster.Event
		want string
	}{
		"false":         {node(cluster.Condition{Status: "False", Reason: "NoFrequentContainerdRestart"}, true), []cluster.Event{ev}, "want True"},
		"no event":      {node(on, true), nil, "no FrequentContainerdRestart Event"},
		"kubelet event": {node(on, true), []cluster.Event{kubelet}, "no FrequentContainerdRestart Event"},
		"not ready":     {node(on, false), []cluster.Event{ev}, "not Ready"},
	} {
		_, err := JudgeRestartReport(c.n, c.evs)
		if err == nil || !strings.Contains(err.Error(), c.want) {
			t.Errorf("%s: %v, want an error with %q", name, err, c.want)
		}
	}
	if err := JudgeConditionFalse(node(on, true), "FrequentContainerdRestart", "before"); err == nil {
		t.Error("JudgeConditionFalse passed a True condition")
	}
	if err := JudgeConditionFalse(&cluster.Node{Name: "n"}, "NICLinkDown", "before"); err == nil {
		t.Error("JudgeConditionFalse passed a missing condition")
	}
}
