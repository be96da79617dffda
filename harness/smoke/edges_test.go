package smoke

import (
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/drover-os/drover/harness/ecsmeta"
	"github.com/drover-os/drover/internal/secretscan"
)

// TestMetadataFaultsCheckUnconfigured: a fault that was not configured is
// not asked of the boot, and a token renewed once (two issued) is enough.
func TestMetadataFaultsCheckUnconfigured(t *testing.T) {
	ok := map[int]int{200: 12}
	for _, tc := range []struct {
		name   string
		faults MetadataFaults
		st     ecsmeta.Stats
		want   string
	}{
		{"no faults, nothing happened", MetadataFaults{}, ecsmeta.Stats{Requests: 12, ByStatus: ok}, ""},
		{"only the delay, nothing failed", MetadataFaults{Delay: time.Second}, ecsmeta.Stats{Requests: 12, Delayed: 5, ByStatus: ok}, ""},
		{"only the token TTL, renewed once", MetadataFaults{TokenTTL: time.Second},
			ecsmeta.Stats{Requests: 12, TokensExpired: 1, TokensIssued: 2, ByStatus: ok}, ""},
		{"only the token TTL, never renewed", MetadataFaults{TokenTTL: time.Second},
			ecsmeta.Stats{Requests: 12, TokensExpired: 1, TokensIssued: 1, ByStatus: ok},
			"a token expired but the node never fetched a new one (1 issued) (12 requests: 0 failed (5xx/429), 0 delayed, 1 refused for an expired token; 1 tokens issued)"},
		{"no faults, no 200", MetadataFaults{}, ecsmeta.Stats{Requests: 3, ByStatus: map[int]int{404: 3}},
			"no request was answered 200: the node cannot have read its user-data from this service"},
		{"every fault missing", MetadataFaults{ErrorRate: 0.25, Delay: time.Second, TokenTTL: 2 * time.Second}, ecsmeta.Stats{Requests: 1, ByStatus: ok},
			"error rate 0.25 configured but no request was failed; delay 1s configured but no request was delayed; " +
				"token TTL 2s configured but no request presented an expired token (1 requests:"},
	} {
		_, err := tc.faults.Check(tc.st)
		if tc.want == "" && err != nil || tc.want != "" && (err == nil || !strings.HasPrefix(err.Error(), tc.want)) {
			t.Errorf("%s: Check = %v, want %q", tc.name, err, tc.want)
		}
	}
}

// TestMetadataFaultsString: the report line names only what is configured.
func TestMetadataFaultsString(t *testing.T) {
	for _, tc := range []struct {
		m    MetadataFaults
		want string
	}{
		{MetadataFaults{}, "metadata: hardened (token required)"},
		{MetadataFaults{ErrorRate: 0.05}, "metadata: hardened (token required), 5% of requests answered 5xx/429"},
		{MetadataFaults{Delay: 3 * time.Second}, "metadata: hardened (token required), 5 requests delayed 3s"},
		{MetadataFaults{TokenTTL: time.Second}, "metadata: hardened (token required), the first token expires after 1s"},
	} {
		if got := tc.m.String(); got != tc.want {
			t.Errorf("%+v: String() = %q, want %q", tc.m, got, tc.want)
		}
		if got := tc.m.Configured(); got != (tc.m != MetadataFaults{}) {
			t.Errorf("%+v: Configured() = %v", tc.m, got)
		}
	}
}

// TestSNTPReplyVersions: NTP versions 3 and 4 are answered in their own
// version; older and newer ones, and server-mode packets, are not.
func TestSNTPReplyVersions(t *testing.T) {
	now := time.Date(2026, 12, 1, 11, 0, 0, 0, time.UTC)
	for vn := byte(0); vn < 8; vn++ {
		req := make([]byte, 48)
		req[0] = vn<<3 | 3
		out, ok := SNTPReply(req, now)
		if want := vn == 3 || vn == 4; ok != want {
			t.Errorf("version %d: answered %v, want %v", vn, ok, want)
			continue
		}
		if ok && out[0] != vn<<3|4 {
			t.Errorf("version %d: reply header %#x, want %#x", vn, out[0], vn<<3|4)
		}
	}
	long := make([]byte, 68) // an NTP packet with an extension field
	long[0] = 4<<3 | 3
	if _, ok := SNTPReply(long, now); !ok {
		t.Error("a request longer than 48 bytes was not answered")
	}
}

// TestExposureLevels: the overall line is read with or without systemd's
// emoji, and a level it does not know is worse than any it does.
func TestExposureLevels(t *testing.T) {
	for line, want := range map[string]string{
		"→ Overall exposure level for drover-agent.service: 4.3 OK":        "",
		"→ Overall exposure level for drover-agent.service: 0.9 PERFECT 😀": "",
		"→ Overall exposure level for drover-agent.service: 2.1 SAFE":      "",
		"→ Overall exposure level for drover-agent.service: 9.9 DANGEROUS": "worse than MEDIUM",
		"→ Overall exposure level for drover-agent.service: 5.0 HARMLESS":  "worse than MEDIUM",
		"→ Overall exposure level for drover-agent.service: 4.3":           "no overall exposure level",
		"→ Overall exposure level for drover-agent.service 4.3 OK":         "no overall exposure level",
		"Overall exposure: 4.3 OK":                                         "no overall exposure level",
		"→ Overall exposure level for drover-agent.service: high OK":       `exposure score "high"`,
	} {
		err := JudgeExposure(line)
		if (want == "") != (err == nil) || err != nil && !strings.Contains(err.Error(), want) {
			t.Errorf("JudgeExposure(%q) = %v, want %q", line, err, want)
		}
	}
	score, level, err := Exposure("→ Overall exposure level for x.service: 6.9 MEDIUM 😐")
	if err != nil || score != 6.9 || level != "MEDIUM" {
		t.Errorf("Exposure = %v %q %v", score, level, err)
	}
}

// TestTimesyncdClientPorts: timesyncd's client socket is allowed on any
// unprivileged port, never on a privileged one.
func TestTimesyncdClientPorts(t *testing.T) {
	for port, ok := range map[string]bool{"1023": false, "1024": true, "1025": true, "60999": true, "68": false} {
		r := good()
		r.Sockets = append(r.Sockets, Socket{Proto: "udp6", Local: "[::]:" + port, Inode: 20, PID: 410, Process: "systemd-timesyn"})
		if err := r.Hardening(); (err == nil) != ok {
			t.Errorf("timesyncd on port %s: Hardening() = %v, want ok=%v", port, err, ok)
		}
	}
}

// TestJudgeVarScanMessages: a file holding the secret is named with where
// in it; blocks outside every file are reported only when no file holds it
// (a file's own blocks would be found again there).
func TestJudgeVarScanMessages(t *testing.T) {
	hit := secretscan.Hit{Path: "/var/lib/drover/config.ign", Where: "plain at 10"}
	for _, tc := range []struct {
		name string
		sc   VarScan
		want string
	}{
		{"a file holds it", VarScan{Files: 40, Hits: []secretscan.Hit{hit, {Path: "/var/log/x", Where: "base64 at 3"}}},
			"the bootstrap token's secret is in /var/lib/drover/config.ign (plain at 10); /var/log/x (base64 at 3)"},
		{"a file and its blocks", VarScan{Files: 40, Hits: []secretscan.Hit{hit}, Raw: []int64{4096}, RawOwners: []string{"offset 4096: inode 12"}},
			"the bootstrap token's secret is in /var/lib/drover/config.ign (plain at 10)"},
		{"free blocks only", VarScan{Files: 40, Raw: []int64{4096, 8192}, RawOwners: []string{"offset 4096: <block not found>", "offset 8192: <block not found>"}},
			"the secret's plain or base64 form is on the var partition outside every file: offset 4096: <block not found>; offset 8192: <block not found>"},
		{"nothing scanned", VarScan{}, "no file was scanned"},
		{"one file scanned", VarScan{Files: 1}, ""},
	} {
		err := JudgeVarScan(&tc.sc)
		if got := fmt.Sprint(err); tc.want == "" && err != nil || tc.want != "" && got != tc.want {
			t.Errorf("%s: JudgeVarScan = %v, want %q", tc.name, err, tc.want)
		}
	}
}
