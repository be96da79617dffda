package rollout

import (
	"context"
	"errors"
	"slices"
	"strings"
	"testing"
)

// The surge's MaxSize is recorded on the group before it is raised, and an
// event says so; a MaxSize ESS refuses to raise stops the rollout before
// any launch.
func TestRaiseMaxSaysSo(t *testing.T) {
	ud := userData(t, "abcdef.0123456789abcdef", nil)
	a, b := desired(t, "m-a", "build-a", ud), desired(t, "m-b", "build-b", ud)
	w := newWorld(t, 2, a)
	w.builds["m-b"] = "build-b"
	if err := w.env.Run(context.Background(), "asg-1", b, Options{MaxUnavailable: 1, Surge: 1}, false); err != nil {
		t.Fatal(err)
	}
	if got := w.cloud.TagWrites(); !slices.Contains(got, "Tag drover:surge=max=2 surge=3") {
		t.Errorf("tag calls %v, want the surge recorded", got)
	}
	if g := w.messages(EventGroup); !strings.Contains(g, "MaxSize 3 for the surge (was 2; 2 is restored at the end)\n") {
		t.Errorf("group events lack the raised MaxSize:\n%s", g)
	}

	w = newWorld(t, 2, a)
	w.builds["m-b"] = "build-b"
	refused := errors.New("Forbidden.RAM: the user is not authorized to ModifyScalingGroup")
	w.env.Cloud = refusingMaxCloud{w.cloud, refused}
	err := w.env.Run(context.Background(), "asg-1", b, Options{MaxUnavailable: 1, Surge: 1}, false)
	if !errors.Is(err, refused) {
		t.Fatalf("err %v, want ESS's refusal", err)
	}
	if got := w.cloud.Writes(); slices.ContainsFunc(got, func(c string) bool { return strings.HasPrefix(c, "ScaleOut") }) {
		t.Errorf("cloud calls %v: launched although MaxSize was not raised", got)
	}
	if g := w.messages(EventGroup); strings.Contains(g, "for the surge") {
		t.Errorf("group events say MaxSize was raised:\n%s", g)
	}
}

// refusingMaxCloud is a FakeCloud whose ModifyScalingGroup MaxSize fails.
type refusingMaxCloud struct {
	*FakeCloud
	err error
}

func (c refusingMaxCloud) SetMaxSize(context.Context, string, int) error { return c.err }

// restoreMax without a warning: nothing raised (MaxSize as the rollout
// started, or no MaxSize known: a repair passes 0), or the surge tag's
// MaxSize restored when the caller knows none.
func TestRestoreMaxQuietly(t *testing.T) {
	for _, c := range []struct {
		name   string
		setup  func(*world)
		max    int
		writes []string
		group  string
	}{
		{"nothing raised", func(w *world) { delete(w.cloud.Tags, SurgeTag); w.cloud.G.MaxSize = 2 }, 2, nil, ""},
		{"nothing raised, no MaxSize known", func(w *world) { delete(w.cloud.Tags, SurgeTag) }, 0, nil, ""},
		{"the tag's MaxSize", func(*world) {}, 0, []string{"SetMaxSize 2"}, "MaxSize 2 again (the surge had raised it to 3)"},
	} {
		t.Run(c.name, func(t *testing.T) {
			w, _ := surgeLeft(t)
			c.setup(w)
			if err := w.env.restoreMax(context.Background(), "asg-1", c.max); err != nil {
				t.Fatal(err)
			}
			if got := w.cloud.Writes(); !slices.Equal(got, c.writes) {
				t.Errorf("cloud calls %v, want %v", got, c.writes)
			}
			if _, ok := w.cloud.Tags[SurgeTag]; ok {
				t.Errorf("surge tag left: %v", w.cloud.Tags)
			}
			if warn := w.messages(EventWarning); warn != "" {
				t.Errorf("warnings:\n%s", warn)
			}
			if g := w.messages(EventGroup); g != c.group {
				t.Errorf("group events %q, want %q", g, c.group)
			}
		})
	}
}
