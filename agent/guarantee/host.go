package guarantee

import (
	"fmt"

	"github.com/drover-os/drover/agent/sysctlset"
)

// Host is what the node's kernel and dynamic loader show: guarantees no
// unit, command line or list of paths can tell, since a privileged pod or
// a unit running sysctl -w changes them without a file.
type Host struct {
	// Sysctls maps each key of sysctlset.Security to the value read from
	// /proc/sys, or "unreadable (…)"; nil: not observed.
	Sysctls map[string]string
	// Preload is "" when /etc/ld.so.preload is absent, else what it
	// holds (or why it could not be read).
	Preload string
}

// LDPreload is the dynamic loader's preload list (ld.so(8)).
const LDPreload = "/etc/ld.so.preload"

// CheckHost lists every broken host guarantee, in sysctlset's order, the
// preload list last.
func CheckHost(h Host) []Violation {
	var out []Violation
	if h.Sysctls != nil {
		for _, s := range sysctlset.Security {
			got, ok := h.Sysctls[s.Key]
			if !ok {
				got = "not observed"
			}
			if !s.Holds(got) {
				out = append(out, Violation{fmt.Sprintf("%s holds %s (%s)", s.Key, orList(s.Want), s.Why), got, s.Path()})
			}
		}
	}
	if h.Preload != "" {
		out = append(out, Violation{LDPreload + " is absent (every library it names is loaded into every program the node starts, as root where the program runs as root)",
			h.Preload, LDPreload})
	}
	return out
}

func orList(want []string) string {
	s := want[0]
	for _, w := range want[1:] {
		s += " or " + w
	}
	return s
}
