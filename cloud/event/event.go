// Package event is the one progress record of drover's commands that act
// on Alibaba Cloud (drover publish, drover rollout) and the one way they
// print it with --json: a JSON object per line on stdout, so a pipeline
// reads both commands' progress and results with the same code
// (docs/events.md).
package event

import (
	"encoding/json"
	"io"
	"sync"
	"time"
)

// Event is one step of a command. Kind says which (each command documents
// its kinds); the other fields are set when the step concerns them.
type Event struct {
	Time     time.Time `json:"time"`
	Kind     string    `json:"event"`
	Region   string    `json:"region,omitempty"`
	Group    string    `json:"group,omitempty"`
	Instance string    `json:"instance,omitempty"`
	Node     string    `json:"node,omitempty"`
	ImageID  string    `json:"imageId,omitempty"`
	Status   string    `json:"status,omitempty"`
	Progress string    `json:"progress,omitempty"`
	Message  string    `json:"message"`
	// Result is the command's outcome as a value, on its last event
	// (publish's "done" and "plan"); nil elsewhere.
	Result any `json:"result,omitempty"`
}

// Kinds both commands use.
const (
	// Plan carries what a command will do (its --dry-run output).
	Plan = "plan"
	// Done is the last event of a command that succeeded.
	Done = "done"
)

// JSONLines returns a func that writes each event to w as one line of
// JSON, safe for concurrent use; an event without a time is stamped with
// now().
func JSONLines(w io.Writer, now func() time.Time) func(Event) {
	var mu sync.Mutex
	enc := json.NewEncoder(w)
	return func(e Event) {
		if e.Time.IsZero() {
			e.Time = now()
		}
		mu.Lock()
		defer mu.Unlock()
		_ = enc.Encode(e)
	}
}
