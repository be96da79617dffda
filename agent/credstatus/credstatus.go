// Package credstatus is the hand-off from the kubelet's image credential
// provider (drover-acr-credential-provider) to drover-agent: the provider
// runs for a moment per pull, under the kubelet, and has no way to tell
// the cluster why it failed but the kubelet's log; the agent, which
// reports the node's health as Node Events, reads what it left.
//
// The provider writes one small file in /run (tmpfs: gone at shutdown)
// after each answer for an ACR registry: when, which registry, and, when
// it failed, the class of the failure and its error as logged (every
// credential already masked). It never holds a credential: no user name,
// password, token or key. The agent polls it and turns a new failure into
// a Warning Event on its Node whose reason names the cause (Watch).
//
// Standard library only: the agent imports it and must stay small.
package credstatus

import (
	"encoding/json"
	"fmt"
	"io"
	"strings"
	"time"
)

// Path is where the provider leaves its status and the agent reads it.
const Path = "/run/drover/credential-provider.status"

// Classes of a failure; "" is success.
const (
	NoRAMRole        = "NoRAMRole"        // the instance has no RAM role (or it was detached)
	AccessDenied     = "AccessDenied"     // the role may not call cr:GetAuthorizationToken
	InstanceNotFound = "InstanceNotFound" // no such ACR Enterprise instance in the region
	Failed           = "Failed"           // anything else (metadata unreachable, ACR 5xx, …)
)

// Status is the provider's last answer for an ACR registry.
type Status struct {
	Time     time.Time `json:"time"`
	Registry string    `json:"registry"` // the image's registry host
	// Class is "" when credentials were issued, else one of the classes.
	Class string `json:"class,omitempty"`
	// Message is the provider's error as the kubelet logged it (masked).
	Message string `json:"message,omitempty"`
}

// maxMessage bounds a status's message and an Event's: the provider's
// errors are a few hundred bytes.
const maxMessage = 1024

// Encode writes s as one JSON object.
func Encode(w io.Writer, s Status) error {
	if len(s.Message) > maxMessage {
		s.Message = s.Message[:maxMessage]
	}
	if err := json.NewEncoder(w).Encode(s); err != nil {
		return fmt.Errorf("encoding the credential provider's status: %w", err)
	}
	return nil
}

// Parse reads what Encode wrote.
func Parse(data []byte) (Status, error) {
	var s Status
	if err := json.Unmarshal(data, &s); err != nil {
		return s, fmt.Errorf("%s is not the credential provider's status: %w", Path, err)
	}
	if s.Time.IsZero() || s.Registry == "" {
		return s, fmt.Errorf("%s has no time or registry", Path)
	}
	return s, nil
}

// Reason is the Node Event's reason for a failure class.
func Reason(class string) string {
	switch class {
	case NoRAMRole:
		return "ACRNoRAMRole"
	case AccessDenied:
		return "ACRAccessDenied"
	case InstanceNotFound:
		return "ACRInstanceNotFound"
	}
	return "ACRCredentialsFailed"
}

// RepeatEvery is how long the same failure (class and registry) stays
// reported: the kubelet retries a pull with back-off, and each retry
// fails the same way; one Event per RepeatEvery says it still does.
const RepeatEvery = 10 * time.Minute

// Watch decides which statuses become Events.
type Watch struct {
	seen       time.Time // the last status's time
	reported   string    // class and registry of the failure last reported; "" after a success
	reportedAt time.Time
}

// Observe judges the status read at now: an Event's reason and message
// for a failure not reported yet (a new class or registry, the first since
// a success, or the same one RepeatEvery later); ok is false for a status
// already seen, a success, or a failure reported recently.
func (w *Watch) Observe(now time.Time, s Status) (reason, message string, ok bool) {
	if !s.Time.After(w.seen) {
		return "", "", false
	}
	w.seen = s.Time
	if s.Class == "" {
		w.reported = ""
		return "", "", false
	}
	key := s.Class + " " + s.Registry
	if key == w.reported && now.Sub(w.reportedAt) < RepeatEvery {
		return "", "", false
	}
	w.reported, w.reportedAt = key, now
	msg := strings.TrimSpace(s.Message)
	if msg == "" {
		msg = s.Class
	}
	if len(msg) > maxMessage {
		msg = msg[:maxMessage]
	}
	return Reason(s.Class), fmt.Sprintf("image credentials for %s (drover-acr-credential-provider, %s): %s",
		s.Registry, s.Time.UTC().Format(time.RFC3339), msg), true
}
