package ignition

import (
	"strconv"
	"strings"
	"unicode/utf8"
)

// This file reads unit files and drop-ins the way systemd does, not the
// way github.com/coreos/go-systemd's unit package does: that one splits
// lines at "\n" only (a lone "\r" stays inside the line, where systemd
// starts a new one) and lets a comment end a continuation, so a drop-in
// it reads as harmless could set ExecStart= for systemd.

// systemdLines splits text into lines as systemd's read_line does
// (read_line_full, src/basic/fileio.c): "\n", "\r" and NUL all end a line,
// and a run of end-of-line bytes counts as one ending as long as no kind
// repeats ("\r\n" is one ending, "\n\n" two); after a NUL a new line
// always starts. A final line without an ending counts; nothing after
// the last ending does not.
func systemdLines(text string) []string {
	const nl, cr, nul = 1, 2, 4
	var out []string
	var cur strings.Builder
	prev := 0
	inLine := false // something (a byte or an ending) belongs to cur
	for i := 0; i < len(text); i++ {
		c := text[i]
		eol := 0
		switch c {
		case '\n':
			eol = nl
		case '\r':
			eol = cr
		case 0:
			eol = nul
		}
		if prev&nul != 0 || (eol == 0 && prev != 0) || (eol != 0 && prev&eol != 0) {
			out = append(out, cur.String())
			cur.Reset()
			prev = 0
		}
		inLine = true
		if eol != 0 {
			prev |= eol
			continue
		}
		cur.WriteByte(c)
	}
	if inLine {
		out = append(out, cur.String())
	}
	return out
}

// unitSetting is one assignment of a unit file or drop-in.
type unitSetting struct {
	line           int // the (first) line it is on, from 1
	section        string
	key, value     string
	outsideSection bool // systemd ignores it
}

const systemdWhitespace = " \t\n\r"

// unitSettings reads every assignment of a unit file as systemd's
// config_parse does (src/shared/conf-parser.c): a line whose first
// non-blank byte is '#' or ';' is a comment, also in the middle of a
// continuation (which goes on after it); a line ending in an unescaped
// backslash continues on the next, the backslash becoming a space; a
// UTF-8 byte order mark is dropped once; "[Name]" opens a section;
// otherwise the key is what precedes the first "=", trimmed.
func unitSettings(text string) []unitSetting {
	var out []unitSetting
	section := ""
	inSection := false
	bomSeen := false
	cont, contLine := "", 0
	continuing := false
	parse := func(l string, line int) {
		l = strings.Trim(l, systemdWhitespace)
		if l == "" {
			return
		}
		if l[0] == '[' {
			if strings.HasSuffix(l, "]") {
				section, inSection = l[1:len(l)-1], true
			}
			return
		}
		k, v, ok := strings.Cut(l, "=")
		k = strings.Trim(k, systemdWhitespace)
		if !ok || k == "" {
			return
		}
		out = append(out, unitSetting{line: line, section: section, key: k,
			value: strings.Trim(v, systemdWhitespace), outsideSection: !inSection})
	}
	for i, buf := range systemdLines(text) {
		line := i + 1
		if t := strings.TrimLeft(buf, systemdWhitespace); t != "" && (t[0] == '#' || t[0] == ';') {
			continue
		}
		l := buf
		if !bomSeen {
			if rest, ok := strings.CutPrefix(buf, "\uFEFF"); ok {
				l, bomSeen = rest, true
			}
		}
		p := l
		if continuing {
			p = cont + l
		} else {
			contLine = line
		}
		if endsEscaped(p) {
			cont, continuing = p[:len(p)-1]+" ", true
			continue
		}
		parse(p, contLine)
		cont, continuing = "", false
	}
	if continuing {
		parse(cont, contLine)
	}
	return out
}

// endsEscaped reports whether s ends in a backslash that is not itself
// escaped.
func endsEscaped(s string) bool {
	escaped := false
	for i := 0; i < len(s); i++ {
		if escaped {
			escaped = false
		} else if s[i] == '\\' {
			escaped = true
		}
	}
	return escaped
}

// cunescapeLoose decodes the C escapes systemd's unquoting accepts
// (\n, \x41, \101, \u0041, …) and drops quote characters, which
// systemd's word splitting removes wherever they are in a word. It is
// loose on purpose: it only has to show whether a name such as
// KUBELET_ARGS can come out of a value, whichever way it was spelt.
func cunescapeLoose(s string) string {
	var b strings.Builder
	for i := 0; i < len(s); i++ {
		c := s[i]
		if c == '"' || c == '\'' {
			continue
		}
		if c != '\\' || i+1 == len(s) {
			b.WriteByte(c)
			continue
		}
		i++
		switch e := s[i]; e {
		case 'a':
			b.WriteByte('\a')
		case 'b':
			b.WriteByte('\b')
		case 'f':
			b.WriteByte('\f')
		case 'n':
			b.WriteByte('\n')
		case 'r':
			b.WriteByte('\r')
		case 't':
			b.WriteByte('\t')
		case 'v':
			b.WriteByte('\v')
		case 's':
			b.WriteByte(' ')
		case 'x', 'u', 'U':
			n := map[byte]int{'x': 2, 'u': 4, 'U': 8}[e]
			if i+1+n > len(s) {
				b.WriteByte(e)
				continue
			}
			v, err := strconv.ParseUint(s[i+1:i+1+n], 16, 32)
			if err != nil {
				b.WriteByte(e)
				continue
			}
			if e == 'x' {
				b.WriteByte(byte(v))
			} else {
				b.WriteRune(rune(v))
			}
			i += n
		case '0', '1', '2', '3', '4', '5', '6', '7':
			if i+3 > len(s) {
				b.WriteByte(e)
				continue
			}
			v, err := strconv.ParseUint(s[i:i+3], 8, 8)
			if err != nil {
				b.WriteByte(e)
				continue
			}
			b.WriteByte(byte(v))
			i += 2
		default:
			b.WriteByte(e)
		}
	}
	if !utf8.ValidString(b.String()) {
		return strings.ToValidUTF8(b.String(), "?")
	}
	return b.String()
}

// A checkedKey is a unit setting a drop-in of a checked unit may not make,
// with the reason the refusal gives; dropinAllowed refuses the rest.
type checkedKey struct {
	key string
	// about reports whether the value matters: nil means any value.
	about func(value string) bool
	show  string // how the refusal names it
	why   string // what it would do
}

const (
	whyCommandLine = "it would decide the kubelet's command line, and with it settings the node file may not lower"
	whyKubeletFS   = "it would change which files the kubelet reads (its configuration, credentials or binary), and with them settings the node file may not lower"
	whyContainerd  = "it would decide containerd's command line and with it the configuration it loads instead of the one drover renders"
	whyContainerFS = "it would change which files containerd reads (its configuration or binary) instead of the ones drover renders"
)

func mentionsKubeletArgs(v string) bool {
	return strings.Contains(v, "KUBELET_ARGS") || strings.Contains(cunescapeLoose(v), "KUBELET_ARGS")
}

// namespaceKeys change the files a service sees: with them the image's
// binary or drover's rendered configuration could be swapped for another
// without touching either.
var namespaceKeys = []string{"RootDirectory", "RootImage", "BindPaths", "BindReadOnlyPaths",
	"TemporaryFileSystem", "MountImages", "ExtensionImages", "ExtensionDirectories"}

// checkedKeys lists, per checked unit, the settings its drop-ins may not
// make that are refused with their own reason; nil for an unchecked unit.
func checkedKeys(unit string) []checkedKey {
	var out []checkedKey
	switch unit {
	case kubeletUnit:
		out = []checkedKey{
			{"ExecStart", nil, "ExecStart=", whyCommandLine},
			{"EnvironmentFile", nil, "EnvironmentFile=", whyCommandLine},
			{"Environment", mentionsKubeletArgs, "KUBELET_ARGS (Environment=)", whyCommandLine},
			{"UnsetEnvironment", mentionsKubeletArgs, "KUBELET_ARGS (UnsetEnvironment=)", whyCommandLine},
		}
		for _, k := range namespaceKeys {
			out = append(out, checkedKey{k, nil, k + "=", whyKubeletFS})
		}
	case containerdUnit:
		out = []checkedKey{
			{"ExecStart", nil, "ExecStart=", whyContainerd},
			{"EnvironmentFile", nil, "EnvironmentFile=", whyContainerd},
		}
		for _, k := range namespaceKeys {
			out = append(out, checkedKey{k, nil, k + "=", whyContainerFS})
		}
	}
	return out
}

// forbiddenSetting returns the first setting of a drop-in text that
// unit's drop-ins may not make: first the settings checkedKeys names with
// their own reasons, then anything dropinAllowed does not list. Sections
// are looked at only by the allowlist: a key outside the section it is
// listed for is refused, which costs a correct drop-in nothing.
//
// Besides systemd's reading, every line is also read on its own, split at
// any line ending and trimmed of any space, as the policy did before it
// followed systemd: what that reading refused stays refused (a line
// systemd joins to the one before it, say).
func forbiddenSetting(unit, text string) (checkedKey, bool) {
	keys := checkedKeys(unit)
	if len(keys) == 0 {
		return checkedKey{}, false
	}
	settings := readSettings(text)
	for _, s := range settings {
		for _, k := range keys {
			if strings.TrimSpace(s.key) == k.key && (k.about == nil || k.about(s.value)) {
				return k, true
			}
		}
	}
	for _, s := range settings {
		if k, bad := dropinAllowed(s); bad {
			return k, true
		}
	}
	return checkedKey{}, false
}

// readSettings is every setting of a unit text as systemd reads it, then
// every line read on its own (section anySection): see forbiddenSetting.
func readSettings(text string) []unitSetting {
	settings := unitSettings(text)
	for _, l := range strings.FieldsFunc(text, func(r rune) bool { return r == '\n' || r == '\r' || r == 0 }) {
		l = strings.TrimSpace(l)
		if l == "" || strings.ContainsRune("#;[", rune(l[0])) {
			continue // a comment or a section: systemd sets nothing there
		}
		if k, v, ok := strings.Cut(l, "="); ok {
			settings = append(settings, unitSetting{key: k, value: v, section: anySection})
		}
	}
	return settings
}
