package smoke

import (
	"encoding/binary"
	"strings"
	"testing"
	"time"

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
		{"rendered and running", TimeResult{DropIn: &rendered, Active: "active", Sub: "running", Synced: true}, ""},
		{"no drop-in", TimeResult{Active: "active", Sub: "running", Synced: true}, "80-drover.conf is missing"},
		{"defaults only", TimeResult{DropIn: &empty, Active: "active", Sub: "running", Synced: true}, `NTP= is "" (0 lines)`},
		{"other servers", TimeResult{DropIn: &other, Active: "active", Sub: "running", Synced: true}, `NTP= is "10.0.2.3 ntp.cloud.aliyuncs.com"`},
		{"not started", TimeResult{DropIn: &rendered, Active: "inactive", Sub: "dead"}, "inactive/dead, want active/running"},
		{"never synchronised", TimeResult{DropIn: &rendered, Active: "active", Sub: "running"}, "has not synchronised the clock"},
	} {
		err := tc.r.Check(served)
		if (tc.want == "") != (err == nil) || err != nil && !strings.Contains(err.Error(), tc.want) {
			t.Errorf("%s: %v, want %q", tc.name, err, tc.want)
		}
	}
}

// TestSNTPReply: a client request is answered as a synchronised server,
// echoing the client's transmit time; anything else is not answered.
func TestSNTPReply(t *testing.T) {
	req := make([]byte, 48)
	req[0] = 0<<6 | 4<<3 | 3 // leap 0, version 4, client
	copy(req[40:], "ORIGIN!!")
	now := time.Date(2026, 12, 1, 11, 0, 0, 500_000_000, time.UTC)
	out, ok := SNTPReply(req, now)
	if !ok || len(out) != 48 || out[0] != 4<<3|4 || out[1] != 2 || string(out[24:32]) != "ORIGIN!!" {
		t.Fatalf("reply %x, %v", out, ok)
	}
	sec := binary.BigEndian.Uint32(out[40:])
	frac := binary.BigEndian.Uint32(out[44:])
	if int64(sec)-ntpEpoch != now.Unix() || frac>>31 != 1 {
		t.Errorf("transmit time %d.%08x, want %d.5", sec, frac, now.Unix()+ntpEpoch)
	}
	for _, bad := range [][]byte{req[:47], append([]byte{4<<3 | 4}, req[1:]...), append([]byte{1<<3 | 3}, req[1:]...)} {
		if _, ok := SNTPReply(bad, now); ok {
			t.Errorf("answered %x", bad[:1])
		}
	}
}
