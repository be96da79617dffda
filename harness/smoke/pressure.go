package smoke

import (
	"context"
	"encoding/json"
	"fmt"
	"strconv"
	"strings"
	"time"

	"github.com/drover-os/drover/harness/cluster"
	"github.com/drover-os/drover/harness/registry"
)

// Node-level memory pressure. The kubelet's eviction signal is
// memory.available (capacity less the root cgroup's working set, which
// counts the inactive file cache as available); below any threshold, hard
// or soft, it reports MemoryPressure=True, and keeps it True for
// evictionPressureTransitionPeriod (5 min by default; the smoke's node
// file sets a minute) after the signal recovers, so that the condition
// does not flap. The probe's
// transient unit makes the pressure outside the pods' cgroup (a pod is
// capped at allocatable by kubepods' own limit before the node as a whole
// runs short) and holds it pressureHold.
//
// The threshold crossed is a soft one the smoke's pool sets
// (pressureSoft, with a grace period longer than the hold, so nothing is
// evicted), not evictionHard's 100Mi: filling a node under emulation to
// 100Mi had the kernel's OOM killer end the filler first, twice, while
// the kubelet still counted 300+ MiB available (not all of the inactive
// file cache could be reclaimed). The unit fills to pressureTarget
// available.
const (
	pressureSoft   = "1Gi"
	pressureTarget = "700" // MiB

	pressurePod  = "memory-pressure"
	pressureWait = 10 * time.Second // the unit waits this long before it fills memory
	pressureHold = 60 * time.Second
	// pressureTransition is the smoke node file's
	// evictionPressureTransitionPeriod (env.go): the kubelet's default
	// is 5 min, which the check waited out idle on each of make test's
	// three smokes (about 3.5 min each).
	pressureTransition = time.Minute
)

// pressureRun is what the first half of the check leaves for the second.
type pressureRun struct {
	created time.Time      // before the probe started the unit
	daemons map[string]any // the probe's MainPID/NRestarts of each daemon, before
}

// checkMemoryPressure puts the node under memory pressure and watches the
// Node from the API server: MemoryPressure False before, True once the
// unit holds the memory, the Node Ready throughout. The second half,
// checkPressureCleared, runs later in the boot (the condition is held
// pressureTransition after the pressure ends; the other checks run
// meanwhile).
func (e *Env) checkMemoryPressure(ctx context.Context, r *Report, in *Instance) *pressureRun {
	s := time.Now()
	name := "memory pressure: MemoryPressure False before, True while the node is short of memory (below the pool's " + pressureSoft + " soft threshold), Node Ready throughout"
	if err := e.conditionFalse(ctx, in, "MemoryPressure", "before the pressure, with nothing holding its memory"); err != nil {
		r.add(name, s, err, "")
		return nil
	}
	pr := &pressureRun{created: time.Now()}
	// A pod of its own, not an exec in the host probe pod (probe.go), as
	// the check was measured: pressureWait allows for this pod's start
	// before the unit fills memory. The unit runs outside the pods'
	// cgroups either way; as an exec the waits would need measuring
	// again.
	msg, err := e.RunPod(ctx, in, pressurePod, registry.ProbeImage,
		[]string{"pressure", strconv.Itoa(int(pressureHold / time.Second)), pressureTarget}, true)
	if err == nil {
		err = json.Unmarshal([]byte(msg), &pr.daemons)
	}
	if err != nil {
		r.add(name, s, err, msg)
		return nil
	}
	var samples []pressureSample
	deadline := time.Now().Add(pressureWait + 3*time.Minute)
	for time.Now().Before(deadline) && ctx.Err() == nil {
		n, err := e.Cluster.Node(ctx, in.NodeName)
		if err == nil {
			samples = append(samples, pressureSample{At: time.Now(), Ready: n.Ready, MemoryPressure: n.Conditions["MemoryPressure"]})
			if n.Conditions["MemoryPressure"].Status == "True" {
				break
			}
		}
		select {
		case <-ctx.Done():
		case <-time.After(2 * time.Second):
		}
	}
	detail, err := JudgePressureOn(samples, pr.created)
	if err != nil {
		// What the unit did, so that the failure names its cause.
		if j, jerr := e.probe(ctx, in, "journal-pressure", []string{"journal", "drover-smoke-pressure.service"}); jerr == nil {
			detail += "; the unit's journal: " + j
		}
		r.add(name, s, err, detail)
		return nil
	}
	r.add(name, s, err, detail)
	return pr
}

// pressureSample is the Node as the API server had it at one moment.
type pressureSample struct {
	At             time.Time
	Ready          bool
	MemoryPressure cluster.Condition
}

// JudgePressureOn: the last sample has MemoryPressure True, set after the
// unit could have filled memory (not before: a node that reports pressure
// for another reason proves nothing), and every sample is Ready.
func JudgePressureOn(samples []pressureSample, created time.Time) (string, error) {
	if len(samples) == 0 {
		return "", fmt.Errorf("the API server gave no Node while the pressure was on")
	}
	var probs []string
	for _, s := range samples {
		if !s.Ready {
			probs = append(probs, fmt.Sprintf("Node not Ready at %s", s.At.Format(time.TimeOnly)))
			break
		}
	}
	last := samples[len(samples)-1]
	c := last.MemoryPressure
	switch {
	case c.Status != "True":
		probs = append(probs, fmt.Sprintf("MemoryPressure still %s (%s) %s after the unit began to fill memory",
			c.Status, c.Reason, last.At.Sub(created.Add(pressureWait)).Round(time.Second)))
	case !c.LastTransitionTime.IsZero() && c.LastTransitionTime.Before(created.Add(pressureWait).Truncate(time.Second)):
		probs = append(probs, fmt.Sprintf("MemoryPressure turned True at %s, before the unit filled memory (from %s)",
			c.LastTransitionTime.Format(time.TimeOnly), created.Add(pressureWait).Format(time.TimeOnly)))
	}
	detail := fmt.Sprintf("MemoryPressure=%s (%s: %s) at %s, %d samples", c.Status, c.Reason, c.Message,
		c.LastTransitionTime.Format(time.TimeOnly), len(samples))
	if len(probs) > 0 {
		return detail, fmt.Errorf("%s", strings.Join(probs, "; "))
	}
	return detail, nil
}

// checkPressureCleared is the second half: once the pressure has ended
// and the kubelet's transition period passed, MemoryPressure is False
// again, turned so after the unit let go of the memory; and the kubelet,
// containerd and the agent were never restarted (same MainPID, same
// NRestarts as before the pressure, the OOM kill and every check between).
func (e *Env) checkPressureCleared(ctx context.Context, r *Report, in *Instance, pr *pressureRun) {
	if pr == nil {
		return
	}
	s := time.Now()
	name := "memory pressure over: MemoryPressure False again after the kubelet's transition period; kubelet, containerd and drover-agent never restarted"
	released := pr.created.Add(pressureWait + pressureHold)
	deadline := released.Add(pressureTransition + 2*time.Minute)
	var n *cluster.Node
	var err error
	for {
		n, err = e.Cluster.Node(ctx, in.NodeName)
		if err == nil && n.Conditions["MemoryPressure"].Status == "False" {
			break
		}
		if time.Now().After(deadline) || ctx.Err() != nil {
			break
		}
		time.Sleep(5 * time.Second)
	}
	if err != nil {
		r.add(name, s, err, "")
		return
	}
	msg, err := e.probe(ctx, in, "daemons-after-pressure", []string{"daemons"})
	var after map[string]any
	if err == nil {
		err = json.Unmarshal([]byte(msg), &after)
	}
	if err != nil {
		r.add(name, s, err, msg)
		return
	}
	detail, err := JudgePressureOff(n, released, pr.daemons, after)
	r.add(name, s, err, detail)
}

// JudgePressureOff: MemoryPressure is False, turned so no earlier than
// the memory was released, and each daemon's MainPID and NRestarts are
// what they were before.
func JudgePressureOff(n *cluster.Node, released time.Time, before, after map[string]any) (string, error) {
	var probs []string
	c := n.Conditions["MemoryPressure"]
	switch {
	case c.Status != "False":
		probs = append(probs, fmt.Sprintf("MemoryPressure is still %s (%s) %s after the memory was released",
			c.Status, c.Reason, time.Since(released).Round(time.Second)))
	case c.LastTransitionTime.IsZero() || c.LastTransitionTime.Before(released.Truncate(time.Second)):
		probs = append(probs, fmt.Sprintf("MemoryPressure turned False at %s, while the memory was still held (until %s)",
			c.LastTransitionTime.Format(time.TimeOnly), released.Format(time.TimeOnly)))
	}
	for _, u := range []string{"kubelet.service", "containerd.service", "drover-agent.service"} {
		b, _ := before[u].(string)
		a, _ := after[u].(string)
		if b == "" || a == "" || strings.Contains(b, "MainPID=0") {
			probs = append(probs, fmt.Sprintf("no MainPID/NRestarts of %s (before %q, after %q)", u, b, a))
		} else if a != b {
			probs = append(probs, fmt.Sprintf("%s restarted: %s before the pressure, %s after", u, b, a))
		}
	}
	detail := fmt.Sprintf("MemoryPressure=%s (%s) since %s, memory released %s; %v", c.Status, c.Reason,
		c.LastTransitionTime.Format(time.TimeOnly), released.Format(time.TimeOnly), after)
	if len(probs) > 0 {
		return detail, fmt.Errorf("%s", strings.Join(probs, "; "))
	}
	return detail, nil
}
