package ecsmeta

import (
	"maps"
	mrand "math/rand/v2"
	"net/http"
	"strings"
	"time"
)

// Faults make the emulator misbehave the way a busy or booting service does.
// Set them with SetFaults at any time; a request uses the faults in force when
// it arrives.
type Faults struct {
	// ErrorRate is the fraction (0..1) of requests answered 500, 502, 503 or 429.
	// Which requests fail and with which status follows from Seed, so a run is
	// reproducible for the same request sequence.
	ErrorRate float64
	Seed      int64
	// FailNext answers the next FailNext requests with FailStatus (default 503):
	// a burst of consecutive failures. It counts down as requests arrive.
	FailNext   int
	FailStatus int
	// FailPaths limits ErrorRate and FailNext to paths with one of these
	// prefixes; empty means every path, the token endpoint included.
	FailPaths []string
	// Delay holds each request this long before answering (a slow service).
	// SlowPaths limits it to paths with one of these prefixes (empty = all);
	// DelayCount > 0 delays only that many requests, counting down.
	Delay      time.Duration
	SlowPaths  []string
	DelayCount int
	// TokenTTLOverride makes issued tokens expire after this long when it is
	// shorter than the TTL the client asked for. TokenTTLCount > 0 shortens
	// only that many tokens, counting down (a token that expires early, as
	// when the service restarts, and then the service is well again).
	TokenTTLOverride time.Duration
	TokenTTLCount    int
}

// injectedStatuses are the statuses ErrorRate picks from: what a rate-limited
// or restarting service behind a proxy answers.
var injectedStatuses = []int{
	http.StatusInternalServerError,
	http.StatusBadGateway,
	http.StatusServiceUnavailable,
	http.StatusTooManyRequests,
}

// Request is one entry of the request log.
type Request struct {
	Time     time.Time
	Method   string
	Path     string
	Status   int  // StatusClientClosed if the client left during a delay
	Token    bool // a token header was sent (valid or not)
	Injected bool // the status came from fault injection
	Delayed  bool
	Expired  bool // refused 401 because the token it sent had expired
}

// Stats count what the emulator has answered since New or ResetLog.
type Stats struct {
	Requests     int
	TokensIssued int
	Injected     int // answered with an injected 5xx/429 (ErrorRate, FailNext)
	Delayed      int // held by Delay before the answer
	// TokensExpired counts requests refused 401 because the token they sent
	// had been issued by this server and had expired (TokenTTLOverride makes
	// that happen during a boot); a client must then fetch a new token.
	TokensExpired int
	// STSIssued counts the RAM role credentials issued (first and rotated).
	STSIssued int
	ByStatus  map[int]int
}

func newRNG(seed int64) *mrand.Rand {
	return mrand.New(mrand.NewPCG(uint64(seed), 0x64726f766572)) // "drover"
}

// SetFaults replaces the faults and reseeds the error-rate generator.
func (s *Server) SetFaults(f Faults) {
	s.mu.Lock()
	defer s.mu.Unlock()
	f.FailPaths = append([]string(nil), f.FailPaths...)
	f.SlowPaths = append([]string(nil), f.SlowPaths...)
	s.faults = f
	s.rng = newRNG(f.Seed)
}

// Faults returns the faults in force, with FailNext and DelayCount as they
// have counted down so far.
func (s *Server) Faults() Faults {
	s.mu.Lock()
	defer s.mu.Unlock()
	f := s.faults
	f.FailPaths = append([]string(nil), f.FailPaths...)
	f.SlowPaths = append([]string(nil), f.SlowPaths...)
	return f
}

// takeFaults decides, under the lock, how the request for p misbehaves: how long
// to delay it and which status to inject (0 = none).
func (s *Server) takeFaults(p string) (time.Duration, int) {
	s.mu.Lock()
	defer s.mu.Unlock()
	f := &s.faults
	var delay time.Duration
	if f.Delay > 0 && matchPrefix(f.SlowPaths, p) {
		switch {
		case f.DelayCount == 0:
			delay = f.Delay
		case f.DelayCount > 0:
			delay = f.Delay
			f.DelayCount--
			if f.DelayCount == 0 {
				f.Delay = 0 // the counted run is over
			}
		}
	}
	status := 0
	if matchPrefix(f.FailPaths, p) {
		switch {
		case f.FailNext > 0:
			f.FailNext--
			status = f.FailStatus
			if status == 0 {
				status = http.StatusServiceUnavailable
			}
		case f.ErrorRate > 0 && s.rng.Float64() < f.ErrorRate:
			status = injectedStatuses[s.rng.IntN(len(injectedStatuses))]
		}
	}
	return delay, status
}

func matchPrefix(prefixes []string, p string) bool {
	if len(prefixes) == 0 {
		return true
	}
	for _, pre := range prefixes {
		if strings.HasPrefix(p, pre) {
			return true
		}
	}
	return false
}

func (s *Server) record(r Request) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.log = append(s.log, r)
	s.stats.Requests++
	s.stats.ByStatus[r.Status]++
	if r.Injected {
		s.stats.Injected++
	}
	if r.Delayed {
		s.stats.Delayed++
	}
	if r.Expired {
		s.stats.TokensExpired++
	}
}

// Requests returns a copy of the request log in completion order.
func (s *Server) Requests() []Request {
	s.mu.Lock()
	defer s.mu.Unlock()
	return append([]Request(nil), s.log...)
}

// Stats returns a copy of the counters.
func (s *Server) Stats() Stats {
	s.mu.Lock()
	defer s.mu.Unlock()
	st := s.stats
	st.ByStatus = maps.Clone(s.stats.ByStatus)
	return st
}

// ResetLog clears the request log and the counters (issued tokens stay valid).
func (s *Server) ResetLog() {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.log = nil
	s.stats = Stats{ByStatus: map[int]int{}}
}
