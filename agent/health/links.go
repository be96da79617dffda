package health

import (
	"fmt"
	"slices"
	"strings"
	"time"

	"github.com/drover-os/drover/nodecontract"
)

// NICLinkDown is the condition the agent owns for the node's network
// interfaces: True while a NIC that is administratively up has no carrier
// (the ENI detached at the hypervisor, the virtual link down), False while
// every one has. The kernel says so in RTM_NEWLINK messages (IFF_LOWER_UP
// cleared); virtio-net and the ENA-like NICs of ECS log no line of their
// own. While the primary NIC is down the API server cannot be reached: the
// Event and the condition arrive once it is back, the Event with the time
// the carrier was lost.
const NICLinkDown = nodecontract.ConditionNICLinkDown

// Link is one update about a network interface.
type Link struct {
	Index     int
	Name, MAC string
	// Watched: a NIC of the instance, not loopback, a bridge, a veth or
	// a tunnel (agent/network.Ignored).
	Watched bool
	Up      bool // IFF_UP: the node wants it up
	Carrier bool // IFF_LOWER_UP
	Deleted bool // RTM_DELLINK: detached, on purpose
}

// Links tracks the carrier of the node's NICs. The zero value is ready.
type Links struct {
	down map[int]linkDown
}

type linkDown struct {
	name string
	at   time.Time
}

// Initial is the condition at the agent's start, before any update.
func (l *Links) Initial() Finding {
	return Finding{Condition: NICLinkDown, Status: "False", Reason: "NICLinksUp", Evidence: "every NIC that is up has a carrier"}
}

// Observe takes one update and returns what changed: an Event and the
// condition True when a NIC loses its carrier, the condition False when
// the last one down has it back.
func (l *Links) Observe(now time.Time, u Link) []Finding {
	if l.down == nil {
		l.down = map[int]linkDown{}
	}
	d, wasDown := l.down[u.Index]
	lost := u.Watched && u.Up && !u.Carrier && !u.Deleted
	switch {
	case lost && !wasDown:
		l.down[u.Index] = linkDown{name: u.Name, at: now}
		ev := fmt.Sprintf("%s (%s): carrier lost at %s (IFF_LOWER_UP cleared while the link is up)", u.Name, u.MAC, now.UTC().Format(time.RFC3339))
		return []Finding{{Event: NICLinkDown, Condition: NICLinkDown, Status: "True", Reason: "CarrierLost", Evidence: l.downList(ev, u.Index)}}
	case !lost && wasDown:
		delete(l.down, u.Index)
		why := "carrier back"
		if u.Deleted {
			why = "detached"
		} else if !u.Up {
			why = "set down"
		}
		back := fmt.Sprintf("%s: %s after %s", d.name, why, now.Sub(d.at).Round(time.Second))
		if len(l.down) > 0 {
			return []Finding{{Condition: NICLinkDown, Status: "True", Reason: "CarrierLost", Evidence: l.downList(back, u.Index)}}
		}
		f := l.Initial()
		f.Evidence = back + "; " + f.Evidence
		return []Finding{f}
	}
	return nil
}

// downList is msg followed by the other NICs still down, if any.
func (l *Links) downList(msg string, index int) string {
	var others []string
	for i, d := range l.down {
		if i != index {
			others = append(others, fmt.Sprintf("%s since %s", d.name, d.at.UTC().Format(time.RFC3339)))
		}
	}
	if len(others) == 0 {
		return msg
	}
	slices.Sort(others)
	return msg + "; also without carrier: " + strings.Join(others, ", ")
}
