package smoke

import (
	"context"
	"encoding/json"
	"fmt"
	"regexp"
	"strings"
	"time"

	"github.com/drover-os/drover/harness/cluster"
	"github.com/drover-os/drover/harness/registry"
)

// guestMAC is the MAC address QEMU gives the VM's NIC (harness/qemu).
const guestMAC = "52:54:00:12:34:56"

// linkDownFor is how long the NIC's link is down: less than the node
// lifecycle controller's grace period, so the Node stays Ready and what is
// judged is the agent's report alone.
const linkDownFor = 20 * time.Second

// checkNICLinkLoss pulls the VM's cable (QEMU's set_link) for linkDownFor
// and looks in the API server for what the agent reports once the link is
// back: a NICLinkDown Event naming the NIC by its MAC with the time the
// carrier went, and the NICLinkDown condition False again after it.
func (e *Env) checkNICLinkLoss(ctx context.Context, r *Report, in *Instance) {
	s := time.Now()
	name := "NIC link loss reported: NICLinkDown Event with the time the carrier went, condition False once it is back"
	if err := e.conditionFalse(ctx, in, "NICLinkDown", "before the link went down"); err != nil {
		r.add(name, s, err, "")
		return
	}
	down := time.Now()
	if err := in.VM.SetLink(false); err != nil {
		r.add(name, s, fmt.Errorf("QEMU set_link off: %w", err), "")
		return
	}
	time.Sleep(linkDownFor)
	up := time.Now()
	if err := in.VM.SetLink(true); err != nil {
		r.add(name, s, fmt.Errorf("QEMU set_link on: %w", err), "")
		return
	}
	detail, err := e.waitFinding(ctx, in, nil, "", func(_ *cluster.Pod, n *cluster.Node, evs []cluster.Event) (string, error) {
		return JudgeLinkLoss(n, evs, down, up)
	})
	r.add(name, s, err, detail)
}

// linkLostLine is the agent's evidence for the VM's NIC.
var linkLostLine = regexp.MustCompile(`^\S+ \(` + regexp.QuoteMeta(guestMAC) + `\): carrier lost at (\S+) `)

// JudgeLinkLoss: a NICLinkDown Event about the Node names the VM's NIC and
// a time between the cable's pull and its return (give or take the
// guest's clock), and the condition is False, turned so after the return.
func JudgeLinkLoss(n *cluster.Node, evs []cluster.Event, down, up time.Time) (string, error) {
	var probs []string
	ev := findEvent(evs, "NICLinkDown", linkLostLine)
	detail := ""
	if ev == nil {
		probs = append(probs, fmt.Sprintf("no NICLinkDown Event from drover-agent naming the NIC %s", guestMAC))
	} else {
		detail = ev.Message
		at, err := time.Parse(time.RFC3339, linkLostLine.FindStringSubmatch(ev.Message)[1])
		const slack = 5 * time.Second
		if err != nil || at.Before(down.Add(-slack)) || at.After(up.Add(slack)) {
			probs = append(probs, fmt.Sprintf("the Event dates the loss %s, outside the link's time down (%s to %s)",
				at.Format(time.TimeOnly), down.Format(time.TimeOnly), up.Format(time.TimeOnly)))
		}
	}
	c, ok := n.Conditions["NICLinkDown"]
	switch {
	case !ok:
		probs = append(probs, "the Node has no NICLinkDown condition")
	case c.Status != "False":
		probs = append(probs, fmt.Sprintf("NICLinkDown is %s (%s: %s) with the link back", c.Status, c.Reason, c.Message))
	case c.LastTransitionTime.Before(up.Add(-time.Second).Truncate(time.Second)):
		probs = append(probs, fmt.Sprintf("NICLinkDown False since %s, before the link came back at %s: it never turned True",
			c.LastTransitionTime.Format(time.TimeOnly), up.Format(time.TimeOnly)))
	default:
		detail += "; condition: " + c.Message
	}
	if !n.Ready {
		probs = append(probs, "the Node is not Ready")
	}
	if len(probs) > 0 {
		return detail, fmt.Errorf("%s", strings.Join(probs, "; "))
	}
	return detail, nil
}

// conditionFalse reads the Node and judges it with JudgeConditionFalse.
func (e *Env) conditionFalse(ctx context.Context, in *Instance, typ, when string) error {
	n, err := e.Cluster.Node(ctx, in.NodeName)
	if err != nil {
		return err
	}
	return JudgeConditionFalse(n, typ, when)
}

// JudgeConditionFalse: the Node has the condition, False.
func JudgeConditionFalse(n *cluster.Node, typ, when string) error {
	c, ok := n.Conditions[typ]
	if !ok {
		return fmt.Errorf("node %s has no %s condition %s (is the agent watching?)", n.Name, typ, when)
	}
	if c.Status != "False" {
		return fmt.Errorf("node %s has %s=%s (%s: %s) %s", n.Name, typ, c.Status, c.Reason, c.Message, when)
	}
	return nil
}

// containerdKills is how often the check kills containerd: the agent's
// threshold (agent/health RestartThreshold).
const containerdKills = 5

// checkContainerdRestarts kills containerd containerdKills times, each
// time once systemd has restarted it, and looks for the
// FrequentContainerdRestart condition and Event, and the Node still Ready.
func (e *Env) checkContainerdRestarts(ctx context.Context, r *Report, in *Instance) {
	s := time.Now()
	name := "containerd restarting repeatedly reported: FrequentContainerdRestart condition and Event, node Ready"
	if err := e.conditionFalse(ctx, in, "FrequentContainerdRestart", "before containerd was killed"); err != nil {
		r.add(name, s, err, "")
		return
	}
	// A pod of its own, not an exec in the host probe pod (probe.go): an
	// exec's streams run through containerd, which this kills.
	msg, err := e.RunPod(ctx, in, "kill-containerd", registry.ProbeImage, []string{"kill-containerd", fmt.Sprint(containerdKills)}, true)
	var res struct{ Killed []int }
	if err == nil {
		err = json.Unmarshal([]byte(msg), &res)
	}
	if err == nil && len(res.Killed) != containerdKills {
		err = fmt.Errorf("the probe killed containerd %d times, not %d", len(res.Killed), containerdKills)
	}
	if err != nil {
		r.add(name, s, err, msg)
		return
	}
	detail, err := e.waitFinding(ctx, in, nil, "", func(_ *cluster.Pod, n *cluster.Node, evs []cluster.Event) (string, error) {
		return JudgeRestartReport(n, evs)
	})
	r.add(name, s, err, fmt.Sprintf("killed PIDs %v; %s", res.Killed, detail))
}

var restartLine = regexp.MustCompile(`^containerd\.service restarted \d+ times in the last `)

// JudgeRestartReport: FrequentContainerdRestart is True with the agent's
// count, a matching Event about the Node, and the Node is Ready.
func JudgeRestartReport(n *cluster.Node, evs []cluster.Event) (string, error) {
	var probs []string
	c := n.Conditions["FrequentContainerdRestart"]
	if c.Status != "True" || c.Reason != "FrequentContainerdRestart" || !restartLine.MatchString(c.Message) {
		probs = append(probs, fmt.Sprintf("FrequentContainerdRestart is %q (%s: %s), want True with the restart count", c.Status, c.Reason, c.Message))
	}
	if findEvent(evs, "FrequentContainerdRestart", restartLine) == nil {
		probs = append(probs, "no FrequentContainerdRestart Event from drover-agent")
	}
	if !n.Ready {
		probs = append(probs, "the Node is not Ready")
	}
	if len(probs) > 0 {
		return c.Message, fmt.Errorf("%s", strings.Join(probs, "; "))
	}
	return c.Message, nil
}
