package rollout

import (
	"bytes"
	"context"
	"fmt"
	"strings"
	"time"
)

// NotReadyError stops a rollout: a new instance's Node was not Ready with
// the desired labels in time. Report holds why (console output, the Node's
// conditions and Events).
type NotReadyError struct {
	Instance string
	Reason   string
	Report   string
}

func (e *NotReadyError) Error() string {
	return fmt.Sprintf("new instance %s is not Ready: %s; no old instance was removed without a Ready replacement", e.Instance, e.Reason)
}

// notReady gathers why a new instance failed, then removes it (unless
// keep: --keep-failed, or a repair's replacement) and stops.
func (e *Env) notReady(ctx context.Context, groupID string, m Member, maxSize int, keep bool) error {
	id := m.Instance.ID
	var b strings.Builder
	fmt.Fprintf(&b, "new instance %s is not Ready after %s: %s\n", id, e.ReadyTimeout, m.Reason)
	if out, err := e.Cloud.ConsoleOutput(ctx, id); err != nil {
		fmt.Fprintf(&b, "console output: %v\n", err)
	} else {
		fmt.Fprintf(&b, "console output (last lines):\n%s", indent(tail(out, 40)))
	}
	if m.Node != nil {
		fmt.Fprintf(&b, "Node %s conditions:\n", m.Node.Name)
		for _, c := range m.Node.Conditions {
			fmt.Fprintf(&b, "  %s=%s %s: %s (since %s)\n", c.Type, c.Status, c.Reason, c.Message, c.Since.UTC().Format(time.RFC3339))
		}
		if evs, err := e.Cluster.Events(ctx, m.Node.Name); err != nil {
			fmt.Fprintf(&b, "Node %s events: %v\n", m.Node.Name, err)
		} else if len(evs) > 0 {
			fmt.Fprintf(&b, "Node %s events:\n%s", m.Node.Name, indent([]byte(strings.Join(evs, "\n")+"\n")))
		}
	}
	if keep {
		fmt.Fprintf(&b, "the instance stays in the group for inspection: remove it (RemoveInstances with DecreaseDesiredCapacity) before running drover rollout again\n")
	} else if err := e.Cloud.Remove(ctx, groupID, []string{id}, true); err != nil {
		fmt.Fprintf(&b, "removing it: %v: remove it by hand (RemoveInstances with DecreaseDesiredCapacity)\n", err)
	} else {
		fmt.Fprintf(&b, "removed it from the group (--keep-failed leaves a failed instance for inspection)\n")
		if m.Node != nil {
			_ = e.Cluster.DeleteNode(ctx, m.Node.Name)
		}
	}
	e.emit(Event{Kind: EventFailed, Group: groupID, Instance: id, Message: strings.TrimSuffix(b.String(), "\n")})
	// A kept instance holds the surge up: restoreMax says so.
	if err := e.restoreMax(ctx, groupID, maxSize); err != nil {
		e.emit(Event{Kind: EventWarning, Group: groupID, Message: "restoring MaxSize: " + err.Error()})
	}
	return &NotReadyError{Instance: id, Reason: m.Reason, Report: b.String()}
}

func tail(b []byte, n int) []byte {
	b = bytes.TrimRight(b, "\n")
	lines := bytes.Split(b, []byte("\n"))
	if len(lines) > n {
		lines = lines[len(lines)-n:]
	}
	return append(bytes.Join(lines, []byte("\n")), '\n')
}

func indent(b []byte) string {
	var s strings.Builder
	for _, l := range strings.SplitAfter(string(b), "\n") {
		if l != "" {
			s.WriteString("  " + l)
		}
	}
	return s.String()
}
