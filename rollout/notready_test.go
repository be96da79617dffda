package rollout

import (
	"context"
	"errors"
	"slices"
	"strings"
	"testing"
	"time"
)

// A new instance whose Node joined but never turned Ready: the failure
// report holds its Node's conditions and Events, and the instance leaves
// the group with its Node object, so no NotReady Node is left behind.
// When ESS refuses the removal, the report says to remove it by hand and
// the Node stays for that.
func TestNotReadyNodeLeavesWithItsInstance(t *testing.T) {
	for _, refuse := range []bool{false, true} {
		t.Run(map[bool]string{false: "removed", true: "removal refused"}[refuse], func(t *testing.T) {
			ud := userData(t, "abcdef.0123456789abcdef", nil)
			a, b := desired(t, "m-a", "build-a", ud), desired(t, "m-b", "build-b", ud)
			w := newWorld(t, 2, a)
			w.cloud.Launched = func(in Instance, _ TemplateVersion) {
				n := readyNode(in.ID, b)
				n.Conditions = []Condition{{Type: "Ready", Status: "False", Reason: "KubeletNotReady", Message: "container runtime network not ready", Since: time.Unix(0, 0)}}
				w.cluster.Put(n)
				if !refuse { // the refused case's Node has no Events: the report has no empty list
					w.cluster.mu.Lock()
					w.cluster.Evs[n.Name] = []string{"Warning NetworkNotReady: cni plugin not initialized"}
					w.cluster.mu.Unlock()
				}
			}
			check := w.cloud.BeforeRemove
			w.cloud.BeforeRemove = func(ids []string, decrease bool) error {
				if refuse && slices.Contains(ids, "i-new1") {
					return errors.New("Throttling.User: Request was denied due to user flow control")
				}
				return check(ids, decrease)
			}
			err := w.env.Run(context.Background(), "asg-1", b, Options{MaxUnavailable: 1, Surge: 1}, false)
			var nr *NotReadyError
			if !errors.As(err, &nr) || nr.Instance != "i-new1" || nr.Reason != "Node node-i-new1 not Ready" {
				t.Fatalf("err %v", err)
			}
			fail := w.messages(EventFailed)
			want := []string{"Node node-i-new1 conditions:\n  Ready=False KubeletNotReady: container runtime network not ready (since 1970-01-01T00:00:00Z)"}
			if !refuse {
				want = append(want, "Node node-i-new1 events:\n  Warning NetworkNotReady: cni plugin not initialized")
			} else if strings.Contains(fail, "events:") {
				t.Errorf("failure report lists Events of a Node that has none:\n%s", fail)
			}
			for _, s := range want {
				if !strings.Contains(fail, s) {
					t.Errorf("failure report lacks %q:\n%s", s, fail)
				}
			}
			removed := "removed it from the group"
			byHand := "removing it: Throttling.User: Request was denied due to user flow control: remove it by hand (RemoveInstances with DecreaseDesiredCapacity)"
			if refuse {
				removed, byHand = byHand, removed
			}
			if !strings.Contains(fail, removed) || strings.Contains(fail, byHand) {
				t.Errorf("failure report says %q or lacks %q:\n%s", byHand, removed, fail)
			}
			var wantK []string
			if !refuse {
				wantK = []string{"DeleteNode node-i-new1"}
			}
			if got := w.cluster.Writes(); !slices.Equal(got, wantK) {
				t.Errorf("cluster calls %v, want %v", got, wantK)
			}
			ins := w.instances()
			if slices.ContainsFunc(ins, func(i Instance) bool { return i.ID == "i-new1" }) != refuse {
				t.Errorf("instances %v", ins)
			}
		})
	}
}
