package smoke

import (
	"errors"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/drover-os/drover/harness/cluster"
	"github.com/drover-os/drover/harness/ecsmeta"
)

func TestMetadataFaultsCheck(t *testing.T) {
	all := MetadataFaults{ErrorRate: 0.3, Delay: 2 * time.Second, TokenTTL: time.Second}
	happened := ecsmeta.Stats{Requests: 40, Injected: 9, Delayed: 5, TokensExpired: 3, TokensIssued: 4, ByStatus: map[int]int{200: 20}}
	for _, tc := range []struct {
		name   string
		faults MetadataFaults
		change func(*ecsmeta.Stats)
		want   string
	}{
		{"every fault happened", all, func(*ecsmeta.Stats) {}, ""},
		{"no request failed", all, func(s *ecsmeta.Stats) { s.Injected = 0 }, "error rate 0.30 configured but no request was failed"},
		{"no request delayed", all, func(s *ecsmeta.Stats) { s.Delayed = 0 }, "delay 2s configured but no request was delayed"},
		{"no token expired", all, func(s *ecsmeta.Stats) { s.TokensExpired = 0 }, "token TTL 1s configured but no request presented an expired token"},
		{"expired token never renewed", all, func(s *ecsmeta.Stats) { s.TokensIssued = 1 }, "never fetched a new one"},
		{"nothing answered 200", all, func(s *ecsmeta.Stats) { s.ByStatus = map[int]int{503: 40} }, "no request was answered 200"},
		{"only the error rate configured", MetadataFaults{ErrorRate: 0.3}, func(s *ecsmeta.Stats) { s.Delayed, s.TokensExpired = 0, 0 }, ""},
		{"only the delay configured, none delayed", MetadataFaults{Delay: time.Second}, func(s *ecsmeta.Stats) { s.Delayed = 0 }, "no request was delayed"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			st := happened
			st.ByStatus = map[int]int{200: 20}
			tc.change(&st)
			detail, err := tc.faults.Check(st)
			switch {
			case tc.want == "" && err != nil:
				t.Errorf("Check = %v, want pass", err)
			case tc.want != "" && (err == nil || !strings.Contains(err.Error(), tc.want)):
				t.Errorf("Check = %v, want %q", err, tc.want)
			}
			want := fmt.Sprintf("%d requests: %d failed (5xx/429), %d delayed, %d refused for an expired token; %d tokens issued",
				st.Requests, st.Injected, st.Delayed, st.TokensExpired, st.TokensIssued)
			if detail != want {
				t.Errorf("detail %q, want %q", detail, want)
			}
		})
	}
}

func TestMetadataFaultsEmulator(t *testing.T) {
	f := MetadataFaults{ErrorRate: 0.3, Delay: 2 * time.Second, TokenTTL: time.Second}.emulator()
	if f.ErrorRate != 0.3 || f.Delay != 2*time.Second || f.DelayCount != DelayedRequests || f.TokenTTLOverride != time.Second || f.TokenTTLCount != 1 {
		t.Errorf("emulator faults %+v", f)
	}
	for _, p := range f.SlowPaths {
		if strings.HasPrefix(ecsmeta.TokenPath, p) {
			t.Errorf("slow path %q covers the token endpoint: a delayed token request cannot expire a token", p)
		}
	}
	if (MetadataFaults{}).Configured() || !(MetadataFaults{TokenTTL: time.Second}).Configured() {
		t.Error("Configured() wrong")
	}
	if got := (MetadataFaults{ErrorRate: 0.3, Delay: 2 * time.Second, TokenTTL: time.Second}).String(); got !=
		"metadata: hardened (token required), 30% of requests answered 5xx/429, 5 requests delayed 2s, the first token expires after 1s" {
		t.Errorf("String() = %q", got)
	}
}

func TestNodeAbsent(t *testing.T) {
	notFound := fmt.Errorf("getting node x: %w", &cluster.APIError{Method: "GET", Path: "/api/v1/nodes/x", Code: 404, Reason: "NotFound"})
	for _, tc := range []struct {
		name string
		node *cluster.Node
		err  error
		want string
	}{
		{"404 NotFound from the API server", nil, notFound, ""},
		{"node registered", &cluster.Node{Name: "x"}, nil, "node x registered although its user-data was refused"},
		{"API server unreachable", nil, errors.New("dial tcp 127.0.0.1:6443: connect: connection refused"), "the API server did not answer"},
		{"forbidden", nil, &cluster.APIError{Code: 403, Reason: "Forbidden"}, "want 404 NotFound for node x, the API server answered 403 Forbidden"},
		{"server error", nil, &cluster.APIError{Code: 500, Reason: "InternalError"}, "answered 500"},
		{"404 without a Status (not the API server)", nil, &cluster.APIError{Code: 404}, "answered 404"},
		{"no error, no node", nil, nil, "without an error or a Node"},
	} {
		err := NodeAbsent("x", tc.node, tc.err)
		if (tc.want == "") != (err == nil) || (err != nil && !strings.Contains(err.Error(), tc.want)) {
			t.Errorf("%s: NodeAbsent = %v, want %q", tc.name, err, tc.want)
		}
	}
}
