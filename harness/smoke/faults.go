package smoke

import (
	"fmt"
	"strings"
	"time"

	"github.com/drover-os/drover/harness/ecsmeta"
)

// MetadataFaults are what the emulated metadata service does wrong while the
// node provisions: a busy, slow, token-expiring service, as ECS's can be.
type MetadataFaults struct {
	ErrorRate float64       // fraction of requests answered 500/502/503/429
	Delay     time.Duration // hold DelayedRequests data requests this long each
	TokenTTL  time.Duration // the first token expires after this long, whatever TTL was asked
}

// DelayedRequests is how many user-data/meta-data requests Delay holds: the
// first ones of the boot, when the agent needs the service most.
const DelayedRequests = 5

// Seed fixes which requests ErrorRate fails, for a given request sequence.
const faultSeed = 30

// Configured reports whether any fault is set.
func (m MetadataFaults) Configured() bool {
	return m.ErrorRate > 0 || m.Delay > 0 || m.TokenTTL > 0
}

// emulator converts the faults to the emulator's.
func (m MetadataFaults) emulator() ecsmeta.Faults {
	// Only the first token is short-lived: the agent renews a token once per
	// request on a 401, so a service whose every token dies within a retry
	// sequence would defeat any client; ECS grants the TTL asked for.
	f := ecsmeta.Faults{ErrorRate: m.ErrorRate, Seed: faultSeed, TokenTTLOverride: m.TokenTTL}
	if m.TokenTTL > 0 {
		f.TokenTTLCount = 1
	}
	if m.Delay > 0 {
		// Not the token endpoint: a data request held past a short token
		// TTL is what makes a token expire in the client's hands.
		f.Delay, f.DelayCount = m.Delay, DelayedRequests
		f.SlowPaths = []string{"/latest/meta-data", "/latest/user-data"}
	}
	return f
}

func (m MetadataFaults) String() string {
	parts := []string{"hardened (token required)"}
	if m.ErrorRate > 0 {
		parts = append(parts, fmt.Sprintf("%.0f%% of requests answered 5xx/429", m.ErrorRate*100))
	}
	if m.Delay > 0 {
		parts = append(parts, fmt.Sprintf("%d requests delayed %s", DelayedRequests, m.Delay))
	}
	if m.TokenTTL > 0 {
		parts = append(parts, fmt.Sprintf("the first token expires after %s", m.TokenTTL))
	}
	return "metadata: " + strings.Join(parts, ", ")
}

// Check compares what the emulator counted during a boot that reached Ready
// with the faults configured: each configured kind must have happened, or
// the node survived nothing. It returns the counts for the report.
func (m MetadataFaults) Check(st ecsmeta.Stats) (string, error) {
	detail := fmt.Sprintf("%d requests: %d failed (5xx/429), %d delayed, %d refused for an expired token; %d tokens issued",
		st.Requests, st.Injected, st.Delayed, st.TokensExpired, st.TokensIssued)
	var probs []string
	if m.ErrorRate > 0 && st.Injected == 0 {
		probs = append(probs, fmt.Sprintf("error rate %.2f configured but no request was failed", m.ErrorRate))
	}
	if m.Delay > 0 && st.Delayed == 0 {
		probs = append(probs, fmt.Sprintf("delay %s configured but no request was delayed", m.Delay))
	}
	if m.TokenTTL > 0 {
		switch {
		case st.TokensExpired == 0:
			probs = append(probs, fmt.Sprintf("token TTL %s configured but no request presented an expired token", m.TokenTTL))
		case st.TokensIssued < 2:
			probs = append(probs, fmt.Sprintf("a token expired but the node never fetched a new one (%d issued)", st.TokensIssued))
		}
	}
	if st.ByStatus[200] == 0 {
		probs = append(probs, "no request was answered 200: the node cannot have read its user-data from this service")
	}
	if len(probs) > 0 {
		return detail, fmt.Errorf("%s (%s)", strings.Join(probs, "; "), detail)
	}
	return detail, nil
}
