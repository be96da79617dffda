package ignition

import (
	"errors"
	"fmt"
	"maps"
	"path"
	"slices"
	"strings"
)

// tmpfilesDir is where user-data puts tmpfiles.d configuration. The agent
// restarts systemd-tmpfiles-setup after apply, so every line there is
// carried out as root: the policy reads them (tmpfilesEntries) and judges
// each path they act on.
const tmpfilesDir = "/etc/tmpfiles.d"

// A tmpfilesEntry is one line of a tmpfiles.d file (tmpfiles.d(5)).
type tmpfilesEntry struct {
	line                   int
	text                   string // the line, for messages
	typ                    byte   // 'f', 'L', …
	path                   string // as written
	mode, user, group, age string
	arg                    string // "" when absent or "-"
}

// tmpfilesTypes are the line types systemd-tmpfiles knows.
const tmpfilesTypes = "fFwdDevqQpLcbCxXrRzZtThHaA"

// tmpfilesEntries reads a tmpfiles.d file as systemd-tmpfiles does
// (read_config_file and parse_line in src/tmpfiles/tmpfiles.c): lines as
// read_line splits them (systemdLines: "\r" ends a line too), blank lines
// and lines starting with '#' skipped, no continuations; six fields split
// at blanks with quotes removed and C escapes decoded, the rest of the
// line the argument. A line that does not read is returned as an error:
// systemd-tmpfiles would skip it, but the policy does not guess.
func tmpfilesEntries(text string) ([]tmpfilesEntry, []error) {
	var out []tmpfilesEntry
	var errs []error
	for i, l := range systemdLines(text) {
		l = strings.Trim(l, systemdWhitespace)
		if l == "" || l[0] == '#' {
			continue
		}
		e := tmpfilesEntry{line: i + 1, text: l}
		rest := l
		var fields [6]string
		n := 0
		var err error
		for ; n < len(fields); n++ {
			var w string
			var ok bool
			w, rest, ok, err = nextWord(rest)
			if err != nil || !ok {
				break
			}
			fields[n] = w
		}
		switch {
		case err != nil:
			errs = append(errs, fmt.Errorf("line %d (%s): %w", e.line, l, err))
			continue
		case n < 2:
			errs = append(errs, fmt.Errorf("line %d (%s): a type and a path are needed", e.line, l))
			continue
		}
		action := fields[0]
		if !strings.ContainsRune(tmpfilesTypes, rune(action[0])) || strings.Trim(action[1:], "+!-=~^") != "" {
			errs = append(errs, fmt.Errorf("line %d (%s): unknown type %q", e.line, l, action))
			continue
		}
		e.typ = action[0]
		e.path, e.mode, e.user, e.group, e.age = fields[1], fields[2], fields[3], fields[4], fields[5]
		if a := strings.Trim(rest, systemdWhitespace); a != "-" {
			e.arg = a
		}
		out = append(out, e)
	}
	return out, errs
}

// nextWord splits the first blank-separated word off s, with quotes
// removed and C escapes decoded (extract_first_word with
// EXTRACT_UNQUOTE|EXTRACT_CUNESCAPE).
func nextWord(s string) (word, rest string, ok bool, err error) {
	s = strings.TrimLeft(s, systemdWhitespace)
	if s == "" {
		return "", "", false, nil
	}
	var b strings.Builder
	var quote byte
	i := 0
	for ; i < len(s); i++ {
		c := s[i]
		switch {
		case c == '\\':
			if i+1 == len(s) {
				return "", "", false, errors.New("a backslash ends the line")
			}
			// Decode one escape with cunescapeLoose's rules.
			j := i + 2
			switch s[i+1] {
			case 'x':
				j = i + 4
			case 'u':
				j = i + 6
			case 'U':
				j = i + 10
			case '0', '1', '2', '3', '4', '5', '6', '7':
				j = i + 4
			}
			j = min(j, len(s))
			b.WriteString(cunescapeLoose(s[i:j]))
			i = j - 1
		case quote != 0 && c == quote:
			quote = 0
		case quote != 0:
			b.WriteByte(c)
		case c == '"' || c == '\'':
			quote = c
		case strings.IndexByte(systemdWhitespace, c) >= 0:
			return b.String(), s[i:], true, nil
		default:
			b.WriteByte(c)
		}
	}
	if quote != 0 {
		return "", "", false, errors.New("a quote is not closed")
	}
	return b.String(), "", true, nil
}

// tmpfilesSpecifiers are the specifiers systemd-tmpfiles resolves to the
// same value on every drover node (it runs for the system, as root).
var tmpfilesSpecifiers = map[byte]string{
	'h': "/root", 'C': "/var/cache", 'L': "/var/log", 'S': "/var/lib", 't': "/run",
	'T': "/tmp", 'V': "/var/tmp", 'u': "root", 'U': "0", 'g': "root", 'G': "0", '%': "%",
}

// expandSpecifiers resolves the specifiers in s that are the same on
// every node and replaces the others (%H, %m, %b, %v, … and any this list
// does not know) by "*", a wildcard for one path component's worth of
// text. unknown names those; a lone '%' at the end is an error, as for
// systemd.
func expandSpecifiers(s string) (out string, unknown []string, err error) {
	var b strings.Builder
	for i := 0; i < len(s); i++ {
		if s[i] != '%' {
			b.WriteByte(s[i])
			continue
		}
		if i+1 == len(s) {
			return "", nil, errors.New("it ends in a lone %")
		}
		i++
		if v, ok := tmpfilesSpecifiers[s[i]]; ok {
			b.WriteString(v)
			continue
		}
		b.WriteByte('*')
		unknown = append(unknown, "%"+string(s[i]))
	}
	return b.String(), unknown, nil
}

// holdingSafe reports whether a line may name a directory that holds a
// protected path: only one that excludes it from cleaning (x, X) or makes
// sure a directory exists without changing its mode, owner or age
// (d, v, q, Q, e with "-"). Every other type would replace, remove,
// copy into, relabel or clean it.
func holdingSafe(e tmpfilesEntry) bool {
	switch e.typ {
	case 'x', 'X':
		return true
	case 'd', 'v', 'q', 'Q', 'e':
		for _, f := range []string{e.mode, e.user, e.group, e.age} {
			if f != "" && f != "-" {
				return false
			}
		}
		return true
	}
	return false
}

// tmpfilesJudge judges tmpfiles.d lines against the places they could reach.
type tmpfilesJudge struct {
	guard surface  // the protected surface and the guarded units' drop-in dirs
	links resolver // the node's links and the config's
}

// problem returns what is wrong with one line, or "".
func (j tmpfilesJudge) problem(e tmpfilesEntry) string {
	at := fmt.Sprintf("line %d (%s): ", e.line, e.text)
	p, unknown, err := expandSpecifiers(e.path)
	if err != nil {
		return at + "the path cannot be read: " + err.Error() + " — write %% for a literal %"
	}
	if !path.IsAbs(p) {
		return "" // systemd-tmpfiles refuses the line
	}
	if msg := j.judgePath(p, e.path, unknown, "it would act on", !holdingSafe(e)); msg != "" {
		return at + msg
	}
	if msg := j.allowed(e, p); msg != "" {
		return at + msg
	}
	if e.arg == "" || (e.typ != 'L' && e.typ != 'C') {
		return ""
	}
	a, unknown, err := expandSpecifiers(e.arg)
	if err != nil {
		return at + "the argument cannot be read: " + err.Error() + " — write %% for a literal %"
	}
	what := "its link target"
	if e.typ == 'C' {
		what = "its copy source"
		if !path.IsAbs(a) {
			return ""
		}
	} else if !path.IsAbs(a) {
		a = path.Dir(path.Clean(p)) + "/" + a
	}
	if msg := j.judgePath(a, e.arg, unknown, what+" is", true); msg != "" {
		return at + msg
	}
	return ""
}

// allowed is the allowlist of tmpfiles.d lines (tmpfilesMayAct): a
// line may act only where user-data may write and nothing reads what is
// written as configuration, wherever the node's links take the path.
// Excluding from cleaning (x, X) keeps things as they are, anywhere;
// making sure a directory exists is allowed on the directories above
// such a place.
func (j tmpfilesJudge) allowed(e tmpfilesEntry, p string) string {
	if e.typ == 'x' || e.typ == 'X' {
		return ""
	}
	for _, cand := range j.links.candidates(p) {
		if tmpfilesMayAct(cand) || holdingSafe(e) && holdsTmpfilesPlace(cand) {
			continue
		}
		where := ""
		if cand != path.Clean(p) {
			where = fmt.Sprintf(" (%q on the node)", cand)
		}
		return fmt.Sprintf("it would act on %q%s, which is not a place tmpfiles.d lines may act on (docs/node-config.md, What user-data may change) — keep what the line makes in /var/lib/<app>, or give the unit RuntimeDirectory= for a directory in /run", e.path, where)
	}
	return ""
}

// holdsTmpfilesPlace reports whether p is a directory above a place where
// tmpfiles.d lines may act.
func holdsTmpfilesPlace(p string) bool {
	for _, e := range append(extensionPoints(), tmpfilesPlaces...) {
		if (e.tmpfiles || e.pattern == "/tmp") && (e.holds(p) || p == "/" && e.pattern != "/") {
			return true
		}
	}
	return false
}

// judgePath checks one path (which may hold wildcards) where the node
// would take it; holding says whether a directory above the surface is
// refused too.
func (j tmpfilesJudge) judgePath(p, written string, unknown []string, verb string, holding bool) string {
	for _, cand := range j.links.candidates(p) {
		where := fmt.Sprintf("%q", written)
		switch {
		case len(unknown) > 0:
			where += fmt.Sprintf(" (%s is known only on the node: any path like %q)", strings.Join(unknown, ", "), cand)
		case cand != path.Clean(p) || written != p:
			where += fmt.Sprintf(" (%q on the node)", cand)
		}
		if g, ok := j.guard.mayCover(cand); ok {
			return fmt.Sprintf("%s %s; %s is protected: %s — %s", verb, where, g.pattern, g.why, g.instead)
		}
		if !holding {
			continue
		}
		if g, ok := j.guard.mayHold(cand); ok {
			return fmt.Sprintf("%s %s, a directory that holds %s, which is protected (%s) — name a path that holds nothing protected", verb, where, g.pattern, g.why)
		}
	}
	return ""
}

// candidates lists where a path (maybe a glob) can lead on the node: the
// path with every link followed, with the last one not followed, and, for
// a glob, through each known link a wildcard component could match.
func (r resolver) candidates(p string) []string {
	pc := components(path.Clean(p))
	seen := map[string]bool{}
	var out []string
	add := func(q string) {
		for _, c := range []string{r.resolve(q), r.resolveParent(q)} {
			if !seen[c] {
				seen[c] = true
				out = append(out, c)
			}
		}
	}
	add(p)
	if !hasMeta(p) {
		return out
	}
	for _, l := range slices.Sorted(maps.Keys(r)) {
		lc := components(l)
		if len(lc) > len(pc) || !hasMeta(strings.Join(pc[:len(lc)], "/")) || !componentsOverlap(pc[:len(lc)], lc) {
			continue
		}
		add(l + "/" + strings.Join(pc[len(lc):], "/"))
	}
	return out
}

func hasMeta(s string) bool { return strings.ContainsAny(s, "*?[") }

// componentOverlap reports whether two path components (either may be a
// glob) can name the same entry; two globs are assumed to.
func componentOverlap(a, b string) bool {
	switch {
	case !hasMeta(a) && !hasMeta(b):
		return a == b
	case hasMeta(a) && hasMeta(b):
		return true
	case hasMeta(a):
		ok, _ := path.Match(a, b)
		return ok
	}
	ok, _ := path.Match(b, a)
	return ok
}

func componentsOverlap(a, b []string) bool {
	for i := range a {
		if !componentOverlap(a[i], b[i]) {
			return false
		}
	}
	return true
}

// mayCover is covering for a path that may be a glob.
func (s surface) mayCover(p string) (guarded, bool) {
	pc := components(p)
	for _, g := range s {
		gc := components(g.pattern)
		if len(pc) < len(gc) || (!g.tree && len(pc) != len(gc)) {
			continue
		}
		if componentsOverlap(pc[:len(gc)], gc) {
			return g, true
		}
	}
	return guarded{}, false
}

// mayHold is holding for a path that may be a glob. "/" holds everything.
func (s surface) mayHold(p string) (guarded, bool) {
	pc := components(p)
	if p == "/" {
		pc = nil
	}
	for _, g := range s {
		gc := components(g.pattern)
		if len(pc) < len(gc) && componentsOverlap(pc, gc[:len(pc)]) {
			return g, true
		}
	}
	return guarded{}, false
}
