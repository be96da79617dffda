package ignition

import (
	"fmt"
	"maps"
	"testing"

	"github.com/coreos/ignition/v2/config/v3_5/types"
)

// TestUnitTypeNeedsAName: systemd takes a name for a unit only when
// something precedes its type suffix, so ".service" is no unit, and no
// alias of one (unit_name_is_valid).
func TestUnitTypeNeedsAName(t *testing.T) {
	for name, want := range map[string]string{
		"kubelet.service":  "service",
		"a.socket":         "socket",
		".service":         "",
		"service":          "",
		"kubelet.conf":     "",
		"kubelet.service.": "",
	} {
		if got := unitType(name); got != want {
			t.Errorf("unitType(%q) = %q, want %q", name, got, want)
		}
	}
	links := []types.Link{link("/etc/systemd/system/.service", "/usr/lib/systemd/system/kubelet.service")}
	if got := unitAliases(links, nodeResolver(links)); len(got) != 0 {
		t.Errorf("unitAliases = %v, want none", got)
	}
}

// TestUnitAliasChainBound: an alias naming a unit of the image that the
// config aliases again is a chain; it is followed for at most eight hops,
// so a loop ends and a longer chain stops short.
func TestUnitAliasChainBound(t *testing.T) {
	var links []types.Link
	for i := range 9 {
		links = append(links, link(fmt.Sprintf("/etc/systemd/system/n%d.service", i), fmt.Sprintf("/usr/lib/systemd/system/n%d.service", i+1)))
	}
	links = append(links, link("/etc/systemd/system/n9.service", "/usr/lib/systemd/system/kubelet.service"))
	got := unitAliases(links, nodeResolver(links))
	if got["n0.service"] != "n8.service" || got["n1.service"] != "n9.service" || got["n2.service"] != kubeletUnit || got["n9.service"] != kubeletUnit {
		t.Errorf("unitAliases = %v: want n0 and n1 to stop after eight hops (at n8, n9), n2 and n9 to reach %s", got, kubeletUnit)
	}

	loop := []types.Link{link("/etc/systemd/system/a.service", "/usr/lib/systemd/system/b.service"), link("/etc/systemd/system/b.service", "/usr/lib/systemd/system/a.service")}
	got = unitAliases(loop, nodeResolver(loop))
	if want := map[string]string{"a.service": "a.service", "b.service": "b.service"}; !maps.Equal(got, want) {
		t.Errorf("a loop: unitAliases = %v, want %v", got, want)
	}
}

// TestResolverHopBound: like the kernel (MAXSYMLINKS), the resolver
// follows at most 40 links on one path and leaves the 41st unfollowed.
func TestResolverHopBound(t *testing.T) {
	var links []types.Link
	for i := range 41 {
		links = append(links, link(fmt.Sprintf("/etc/opt/c/l%d", i), fmt.Sprintf("l%d", i+1)))
	}
	r := nodeResolver(append(links, link("/etc/opt/c/l41", "/var/lib/x")))
	if got := r.resolve("/etc/opt/c/l2"); got != "/var/lib/x" {
		t.Errorf("40 links: resolve = %q, want /var/lib/x", got)
	}
	if got := r.resolve("/etc/opt/c/l1"); got != "/etc/opt/c/l41" {
		t.Errorf("41 links: resolve = %q, want /etc/opt/c/l41 (not followed)", got)
	}
}
