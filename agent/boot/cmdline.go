package boot

import "strings"

// Cmdline holds the drover.* parameters of the kernel command line.
type Cmdline struct {
	RootHash    string // drover.roothash=<hex>; must match the config
	HasRootHash bool
	Debug       bool   // drover.debug: print the details of every step
	Break       string // drover.break=<step>: stop before that step and reboot (tests)
}

// ParseCmdline reads the drover.* parameters from the contents of
// /proc/cmdline. Words are split as the kernel splits them (double quotes
// group, and are removed); a later parameter overrides an earlier one.
func ParseCmdline(s string) Cmdline {
	var c Cmdline
	for _, w := range splitCmdline(s) {
		key, val, hasVal := strings.Cut(w, "=")
		switch key {
		case "drover.roothash":
			c.RootHash, c.HasRootHash = strings.ToLower(val), true
		case "drover.debug":
			c.Debug = !hasVal || parseBool(val)
		case "drover.break":
			c.Break = val
		}
	}
	return c
}

func parseBool(v string) bool {
	switch strings.ToLower(v) {
	case "0", "no", "n", "false", "off":
		return false
	}
	return true
}

func splitCmdline(s string) []string {
	var words []string
	var cur strings.Builder
	inQuote, inWord := false, false
	for _, r := range s {
		switch {
		case r == '"':
			inQuote = !inQuote
			inWord = true
		case !inQuote && (r == ' ' || r == '\t' || r == '\n'):
			if inWord {
				words = append(words, cur.String())
				cur.Reset()
				inWord = false
			}
		default:
			cur.WriteRune(r)
			inWord = true
		}
	}
	if inWord {
		words = append(words, cur.String())
	}
	return words
}
