package smoke

import (
	"strings"
	"testing"

	"github.com/drover-os/drover/agent/nodeconfig"
	"github.com/drover-os/drover/agent/provider"
)

func TestTimeResultCheck(t *testing.T) {
	served := []string{"10.0.2.2", "ntp.cloud.aliyuncs.com"}
	f := nodeconfig.Facts{}
	f.NTPServers, _ = provider.ParseNTPServers(strings.Join(served, "\n"))
	rendered := string(nodeconfig.TimesyncdConfig(f))
	empty := string(nodeconfig.TimesyncdConfig(nodeconfig.Facts{}))
	other := strings.Replace(rendered, "10.0.2.2", "10.0.2.3", 1)
	for _, tc := range []struct {
		name string
		r    TimeResult
		want string
	}{
		{"rendered and running", TimeResult{DropIn: &rendered, Active: "active", Sub: "running"}, ""},
		{"no drop-in", TimeResult{Active: "active", Sub: "running"}, "80-drover.conf is missing"},
		{"defaults only", TimeResult{DropIn: &empty, Active: "active", Sub: "running"}, `NTP= is "" (0 lines)`},
		{"other servers", TimeResult{DropIn: &other, Active: "active", Sub: "running"}, `NTP= is "10.0.2.3 ntp.cloud.aliyuncs.com"`},
		{"not started", TimeResult{DropIn: &rendered, Active: "inactive", Sub: "dead"}, "inactive/dead, want active/running"},
	} {
		err := tc.r.Check(served)
		if (tc.want == "") != (err == nil) || err != nil && !strings.Contains(err.Error(), tc.want) {
			t.Errorf("%s: %v, want %q", tc.name, err, tc.want)
		}
	}
}
