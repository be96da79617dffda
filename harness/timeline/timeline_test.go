package timeline

import (
	"bytes"
	"strings"
	"testing"
)

const sample = `BdsDxe: loading Boot0001
[    0.000000] Linux version 6.12.117+deb13-cloud-amd64
[    5.186365] drover-init: mount-api (+0.004s)
[    6.385891] drover-init: verity (+1.245s)
[    7.677467] drover-init: exec /usr/lib/systemd/systemd (+2.536s)
drover-agent: [  12.30s] start: started
drover-agent: [  14.00s] start: ok (1.7s): exec at 12.30s
drover-agent: [  14.10s] config: started
drover-agent: [  14.90s] config: ok (0.8s): user-data from ecs
drover-agent: [  15.20s] apply: ok (0.3s): 3 paths managed
drover-agent: [  19.00s] kubelet: started
drover-agent: [  41.50s] ready: ok (20.0s): node x Ready
`

func TestParse(t *testing.T) {
	tl := Parse("[    0.000000] Linux version old boot\ndrover-agent: [  99.00s] ready: ok\n" + sample)
	var b bytes.Buffer
	tl.Print(&b)
	want := `      0.00s  kernel
      5.19s  initrd (drover-init)
      6.39s  verity root
      7.68s  systemd
     12.30s  agent exec
     14.00s  agent start
     14.10s  agent started
     14.90s  agent config
     15.20s  agent apply
     19.00s  kubelet starting
     41.50s  node Ready
`
	if b.String() != want {
		t.Errorf("timeline:\n%s\nwant:\n%s", b.String(), want)
	}
	m := Median([]Timeline{tl, Parse(strings.Replace(sample, "41.50s", "30.00s", 1)), Parse(strings.Replace(sample, "41.50s", "50.00s", 1))})
	if v, _ := m.Get("node Ready"); v != 41.5 {
		t.Errorf("median node Ready = %v", v)
	}
}

func TestTableRoundTripAndSideBySide(t *testing.T) {
	first := Parse(sample)
	reboot := Parse(strings.Replace(sample, "41.50s", "21.25s", 1))
	reboot.Events = reboot.Events[1:] // a reboot without the kernel line
	tab := MakeTable(first, reboot)
	text := tab.Format()
	back, err := ParseTable(text)
	if err != nil {
		t.Fatal(err)
	}
	if back.Format() != text {
		t.Errorf("round trip:\n%s\nwant:\n%s", back.Format(), text)
	}
	if !strings.Contains(text, "kernel                             0.00          -\n") ||
		!strings.Contains(text, "node Ready                        41.50      21.25\n") {
		t.Errorf("table:\n%s", text)
	}
	prev, _ := ParseTable("# old\nagent started 22.60 20.00\nnode Ready 40.00 -\ngone event 1.00 2.00\n")
	sbs := SideBySide(tab, prev)
	for _, want := range []string{
		"node Ready                        41.50      40.00   (+1.50)        21.25          -",
		"agent started                     14.10      22.60   (-8.50)        14.10      20.00   (-5.90)",
		"gone event                            -       1.00                      -       2.00",
	} {
		if !strings.Contains(sbs, want) {
			t.Errorf("side by side lacks %q:\n%s", want, sbs)
		}
	}
	if _, err := ParseTable("node Ready forty 1\n"); err == nil {
		t.Error("a bad number must be an error")
	}
}

// TestNetReady: Ready less the config phase (started 14.10, ok 14.90), and
// no figure when the phase is missing or a FAILED config left no end.
func TestNetReady(t *testing.T) {
	if v, ok := Parse(sample).NetReady(); !ok || v < 40.69 || v > 40.71 {
		t.Errorf("NetReady = %v, %v; want 41.50 - 0.80 = 40.70", v, ok)
	}
	for name, log := range map[string]string{
		"no config end":   strings.Replace(sample, "config: ok", "config: FAILED", 1),
		"no config start": strings.Replace(sample, "config: started", "config: begun", 1),
		"not Ready":       strings.Replace(sample, "ready: ok", "ready: FAILED", 1),
	} {
		if v, ok := Parse(log).NetReady(); ok {
			t.Errorf("%s: NetReady = %v, true; want no figure", name, v)
		}
	}
}

// TestNetReadyInstantConfig: a config phase that started and ended on the
// same stamp is a zero-length phase, not a missing one.
func TestNetReadyInstantConfig(t *testing.T) {
	log := strings.Replace(sample, "[  14.90s] config: ok", "[  14.10s] config: ok", 1)
	if v, ok := Parse(log).NetReady(); !ok || v != 41.5 {
		t.Errorf("NetReady = %v, %v; want 41.5 (nothing to take off), true", v, ok)
	}
}

// TestParseKeepsOrderOfEqualStamps: events stamped alike stay in the order
// the console printed them (and a console that starts with an empty line
// right before the boot is read from the boot).
func TestParseKeepsOrderOfEqualStamps(t *testing.T) {
	log := "\n[    0.000000] Linux version x\ndrover-agent: [  15.20s] apply: ok\ndrover-agent: [  15.20s] units: ok\ndrover-agent: [  15.20s] network: ok\n"
	var names []string
	for _, e := range Parse(log).Events {
		names = append(names, e.Name)
	}
	if got := strings.Join(names, ", "); got != "kernel, agent apply, agent units, agent network" {
		t.Errorf("events %s", got)
	}
}

// TestParseTableErrors: a bad figure is refused naming its line.
func TestParseTableErrors(t *testing.T) {
	_, err := ParseTable("# header\nkernel 0.00 0.00\nnode Ready x 3.00\n")
	if err == nil || !strings.Contains(err.Error(), "line 3") || !strings.Contains(err.Error(), `"x"`) {
		t.Errorf("ParseTable: %v; want an error naming line 3 and \"x\"", err)
	}
}
