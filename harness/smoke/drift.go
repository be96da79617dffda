package smoke

import (
	"context"
	"fmt"
	"strings"
	"time"

	"github.com/drover-os/drover/harness/cluster"
)

// DriftCondition is the Node condition drover-agent's guard sets.
const DriftCondition = "DroverConfigDrift"

// JudgeDrift checks the API server's view after a watched file was edited:
// the Node's DroverConfigDrift condition True naming the path, and exactly
// one ConfigDrift Event about the Node naming it (one report per change).
func JudgeDrift(n *cluster.Node, events []cluster.Event, path string, what ...string) error {
	c, ok := n.Conditions[DriftCondition]
	if !ok || c.Status != "True" || !strings.Contains(c.Message, path) {
		return fmt.Errorf("node %s condition %s = %+v (present %t), want True naming %s", n.Name, DriftCondition, c, ok, path)
	}
	for _, w := range what {
		if !strings.Contains(c.Message, path+" "+w) {
			return fmt.Errorf("condition %s message %q does not report the %s change of %s", DriftCondition, c.Message, w, path)
		}
	}
	if got := driftEvents(events, path); got != 1 {
		return fmt.Errorf("%d ConfigDrift events about node %s name %s, want exactly 1", got, n.Name, path)
	}
	return nil
}

// JudgeStoredDrift checks the API server's view after a boot found the
// agent's stored config not the user-data's: the Node's DroverConfigDrift
// condition True, and exactly one ConfigDrift Event, naming the path with
// what that boot found there — "contents (want the user-data's …, got
// <got>)", got being the planted file's sha256 prefix or "missing". The
// guard of the boot before, which saw the same file change, reports it
// against its own record ("want <sha256>"): those Events do not count.
func JudgeStoredDrift(n *cluster.Node, events []cluster.Event, path, got string) error {
	found := func(msg string) bool {
		return strings.Contains(msg, path+" contents (want the user-data's") && strings.Contains(msg, "got "+got+")")
	}
	c, ok := n.Conditions[DriftCondition]
	if !ok || c.Status != "True" || !found(c.Message) {
		return fmt.Errorf("node %s condition %s = %+v (present %t), want True naming %s not the user-data's, got %s", n.Name, DriftCondition, c, ok, path, got)
	}
	count := 0
	for _, e := range events {
		if e.Reason == "ConfigDrift" && e.InvolvedKind == "Node" && e.Type == "Warning" && found(e.Message) {
			count++
		}
	}
	if count != 1 {
		return fmt.Errorf("%d ConfigDrift events about node %s name %s not the user-data's with got %s, want exactly 1", count, n.Name, path, got)
	}
	return nil
}

func driftEvents(events []cluster.Event, path string) int {
	got := 0
	for _, e := range events {
		if e.Reason == "ConfigDrift" && e.InvolvedKind == "Node" && e.Type == "Warning" && strings.Contains(e.Message, path) {
			got++
		}
	}
	return got
}

// JudgeDriftCleared checks the condition went back to False once the file
// was restored.
func JudgeDriftCleared(n *cluster.Node) error {
	if c := n.Conditions[DriftCondition]; c.Status != "False" {
		return fmt.Errorf("node %s condition %s = %+v after the restore, want False", n.Name, DriftCondition, c)
	}
	return nil
}

// checkDrift edits a watched file (contents and mode) through the probe's
// read-write mount of the node's /etc, waits for the guard's condition and
// Event in the API server, restores the file and waits for the condition
// to clear.
func (e *Env) checkDrift(ctx context.Context, r *Report, in *Instance) {
	s := time.Now()
	edited := append([]byte(evidenceScript), "# drift: edited on the node by drover smoke\n"...)
	rel := strings.TrimPrefix(EvidenceScript, "/etc/")
	if _, err := e.probe(ctx, in, "drift-edit", []string{"put-etc", rel, b64(edited), "0700"}); !r.add("edit watched "+EvidenceScript+" on the node (contents, mode 0755 → 0700)", s, err, "") {
		return
	}
	s = time.Now()
	wctx, cancel := context.WithTimeout(ctx, 5*time.Minute)
	err := e.waitNode(wctx, in, func(n *cluster.Node, ev []cluster.Event) error {
		return JudgeDrift(n, ev, EvidenceScript, "contents", "mode")
	})
	cancel()
	if !r.add("DroverConfigDrift condition and one ConfigDrift Event in the API server", s, err, "") {
		return
	}
	s = time.Now()
	if _, err := e.probe(ctx, in, "drift-restore", []string{"put-etc", rel, b64([]byte(evidenceScript)), "0755"}); !r.add("restore "+EvidenceScript, s, err, "") {
		return
	}
	wctx, cancel = context.WithTimeout(ctx, 5*time.Minute)
	err = e.waitNode(wctx, in, func(n *cluster.Node, ev []cluster.Event) error {
		if err := JudgeDriftCleared(n); err != nil {
			return err
		}
		if got := driftEvents(ev, EvidenceScript); got != 1 {
			return fmt.Errorf("%d ConfigDrift events name %s after the restore, want still 1", got, EvidenceScript)
		}
		return nil
	})
	cancel()
	r.add("DroverConfigDrift back to False after the restore", s, err, "")
}

// waitNode polls the Node and its events until judge passes or ctx ends.
func (e *Env) waitNode(ctx context.Context, in *Instance, judge func(*cluster.Node, []cluster.Event) error) error {
	for {
		n, err := e.Cluster.Node(ctx, in.NodeName)
		var ev []cluster.Event
		if err == nil {
			ev, err = e.Cluster.Events(ctx, "default", "Node", in.NodeName)
		}
		if err == nil {
			if err = judge(n, ev); err == nil {
				return nil
			}
		}
		select {
		case <-ctx.Done():
			return fmt.Errorf("%w (last: %v)", ctx.Err(), err)
		case <-time.After(3 * time.Second):
		}
	}
}
