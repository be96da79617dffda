package ignition

import (
	"encoding/json"
	"slices"
	"testing"
)

// TestPlanStart: every unit the config enables, whatever it is and
// whichever target wants it, is in Start exactly once, in config order;
// disabled, masked and not-enabled units are not, nor units enabled only
// for targets a boot never reaches.
func TestPlanStart(t *testing.T) {
	unit := func(name, contents string, enabled *bool, mask bool) map[string]any {
		u := map[string]any{"name": name}
		if contents != "" {
			u["contents"] = contents
		}
		if enabled != nil {
			u["enabled"] = *enabled
		}
		if mask {
			u["mask"] = true
		}
		return u
	}
	yes, no := true, false
	units := []any{
		unit("once.service", "[Service]\nType=oneshot\nExecStart=/bin/true\n[Install]\nWantedBy=multi-user.target\n", &yes, false),
		unit("tick.timer", "[Timer]\nOnActiveSec=5\n[Install]\nWantedBy=timers.target\n", &yes, false),
		unit("tick.service", "[Service]\nType=oneshot\nExecStart=/bin/true\n", nil, false),
		unit("listen.socket", "[Socket]\nListenStream=/run/x.sock\n[Install]\nWantedBy=sockets.target\n", &yes, false),
		unit("watch.path", "[Path]\nPathExists=/var/x\n[Install]\nWantedBy=paths.target\n", &yes, false),
		unit("needed.service", "[Service]\nExecStart=/bin/sleep infinity\n[Install]\nRequiredBy=custom.target\nWantedBy=multi-user.target\n", &yes, false),
		unit("worker@.service", "[Service]\nExecStart=/bin/true %i\n[Install]\nWantedBy=multi-user.target\nDefaultInstance=one\n", &yes, false),
		unit("worker@two.service", "", &yes, false),
		unit("rescue-only.service", "[Service]\nExecStart=/bin/true\n[Install]\nWantedBy=rescue.target\n", &yes, false),
		unit("off.service", "[Service]\nExecStart=/bin/true\n[Install]\nWantedBy=multi-user.target\n", &no, false),
		unit("masked.service", "", nil, true),
		unit("image.service", "", &yes, false), // shipped in the image: wanted by multi-user.target
		unit("kubelet.service", "", nil, false),
	}
	units[len(units)-1].(map[string]any)["dropins"] = []any{map[string]any{"name": "10-x.conf", "contents": "[Service]\nEnvironment=NO_PROXY=x\n"}}
	data, err := json.Marshal(map[string]any{"ignition": map[string]any{"version": "3.4.0"}, "systemd": map[string]any{"units": units}})
	must(t, err)
	cfg, err := Parse(data)
	must(t, err)
	plan, err := Plan(cfg)
	must(t, err)
	want := []string{"once.service", "tick.timer", "listen.socket", "watch.path", "needed.service",
		"worker@one.service", "worker@two.service", "image.service"}
	if !slices.Equal(plan.Start, want) {
		t.Errorf("Start = %q\nwant    %q", plan.Start, want)
	}
}
