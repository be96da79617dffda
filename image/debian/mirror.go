package debian

import (
	"errors"
	"fmt"
	"io/fs"
	"net/url"
	"path"
	"slices"
	"sort"
	"strings"
)

// MirrorEnv is the environment variable that names the archive root when no
// --mirror flag is given.
const MirrorEnv = "DROVER_MIRROR"

// SecurityMirrorEnv names the security archive's root (where the -security
// suites are) when no --security-mirror flag is given.
const SecurityMirrorEnv = "DROVER_SECURITY_MIRROR"

// IsSecuritySuite reports whether suite is a security suite
// (trixie-security): Debian publishes those on the security archive, a
// repository of its own with its own pool and signing key.
func IsSecuritySuite(suite string) bool { return strings.HasSuffix(suite, "-security") }

// errNoMirror is wrapped by MirrorFromAPT when the host's sources name no
// usable Debian archive.
var errNoMirror = errors.New("no Debian archive in the host's apt sources")

// sourceEntry is one `deb` line or one deb822 stanza, already split.
type sourceEntry struct {
	file     string
	uris     []string
	suites   []string
	signedBy string
}

// ResolveMirror picks the archive root: the flag if set, else $DROVER_MIRROR,
// else the first Debian entry of the host's apt sources (see MirrorFromAPT).
// The result has no trailing slash.
func ResolveMirror(flag string, getenv func(string) string, fsys fs.FS) (string, error) {
	if flag != "" {
		return normalizeMirror(flag, "--mirror")
	}
	if v := getenv(MirrorEnv); v != "" {
		return normalizeMirror(v, MirrorEnv)
	}
	return MirrorFromAPT(fsys)
}

func normalizeMirror(raw, from string) (string, error) {
	u, err := url.Parse(strings.TrimSpace(raw))
	if err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" {
		return "", fmt.Errorf("mirror %q from %s: want an http:// or https:// URL of the archive root, e.g. http://HOST/debian", raw, from)
	}
	return strings.TrimRight(u.String(), "/"), nil
}

// MirrorFromAPT reads the apt sources under fsys (rooted at the host's /):
// etc/apt/sources.list, etc/apt/sources.list.d/*.list (one-line format) and
// etc/apt/sources.list.d/*.sources (deb822), in the order apt reads them, and
// returns the URI of the first `deb` entry that is not only a -security suite.
// That URI is the archive root; drover asks it for any suite, not only the
// host's own release.
//
// Entries signed by a keyring file that is not a Debian archive keyring (a
// vendor repository) are skipped, since they never carry Debian suites.
func MirrorFromAPT(fsys fs.FS) (string, error) {
	m, err := firstAPTEntry(fsys, usableEntry)
	if err != nil {
		return "", err
	}
	if m == "" {
		return "", fmt.Errorf("finding the Debian mirror: %w (read /etc/apt/sources.list and /etc/apt/sources.list.d/*.list, *.sources): pass --mirror or set %s to the archive root, e.g. http://HOST/debian", errNoMirror, MirrorEnv)
	}
	return m, nil
}

// ResolveSecurityMirror picks the security archive's root the way
// ResolveMirror picks the main one: the flag, else $DROVER_SECURITY_MIRROR,
// else the first Debian entry of the host's apt sources for a -security
// suite (whatever release it is for: the archive root serves them all).
func ResolveSecurityMirror(flag string, getenv func(string) string, fsys fs.FS) (string, error) {
	if flag != "" {
		return normalizeMirror(flag, "--security-mirror")
	}
	if v := getenv(SecurityMirrorEnv); v != "" {
		return normalizeMirror(v, SecurityMirrorEnv)
	}
	m, err := firstAPTEntry(fsys, securityEntry)
	if err != nil {
		return "", err
	}
	if m == "" {
		return "", fmt.Errorf("finding the Debian security archive: no -security suite in the host's apt sources (read /etc/apt/sources.list and /etc/apt/sources.list.d/*.list, *.sources): pass --security-mirror or set %s to the security archive's root, e.g. http://HOST/debian-security", SecurityMirrorEnv)
	}
	return m, nil
}

// firstAPTEntry returns the first URI of the first entry of the host's apt
// sources that use accepts, in the order apt reads them; "" when none does.
func firstAPTEntry(fsys fs.FS, use func(sourceEntry) bool) (string, error) {
	var files []string
	if _, err := fs.Stat(fsys, "etc/apt/sources.list"); err == nil {
		files = append(files, "etc/apt/sources.list")
	}
	var parts []string
	for _, pattern := range []string{"etc/apt/sources.list.d/*.list", "etc/apt/sources.list.d/*.sources"} {
		m, err := fs.Glob(fsys, pattern)
		if err != nil {
			return "", fmt.Errorf("listing apt sources %s: %w", pattern, err)
		}
		parts = append(parts, m...)
	}
	// apt reads sources.list.d in file name order, whatever the format.
	sort.Strings(parts)
	files = append(files, parts...)

	for _, name := range files {
		data, err := fs.ReadFile(fsys, name)
		if err != nil {
			return "", fmt.Errorf("reading apt sources /%s: %w", name, err)
		}
		var entries []sourceEntry
		if strings.HasSuffix(name, ".sources") {
			entries = parseDeb822Sources(name, string(data))
		} else {
			entries = parseOneLineSources(name, string(data))
		}
		for _, e := range entries {
			if !use(e) {
				continue
			}
			for _, u := range e.uris {
				if m, err := normalizeMirror(u, "/"+e.file); err == nil {
					return m, nil
				}
			}
		}
	}
	return "", nil
}

// securityEntry accepts a Debian entry for a -security suite.
func securityEntry(e sourceEntry) bool {
	return len(e.uris) > 0 && signedByDebian(e.signedBy) && slices.ContainsFunc(e.suites, IsSecuritySuite)
}

func usableEntry(e sourceEntry) bool {
	if len(e.uris) == 0 {
		return false
	}
	if !signedByDebian(e.signedBy) {
		return false
	}
	for _, s := range e.suites {
		// A flat repository ("./") or a security-only entry is not the archive root.
		if !strings.HasSuffix(s, "-security") && !strings.Contains(s, "/") {
			return true
		}
	}
	return false
}

// signedByDebian reports whether a Signed-By value allows a Debian archive:
// empty (apt's trusted keyrings), fingerprints or an inline key (unknown, so
// accepted), or key files one of which is a Debian archive keyring.
func signedByDebian(v string) bool {
	v = strings.TrimSpace(v)
	if v == "" || strings.Contains(v, "BEGIN PGP") {
		return true
	}
	sawPath := false
	for _, f := range strings.FieldsFunc(v, func(r rune) bool { return r == ',' || r == ' ' || r == '\t' || r == '\n' }) {
		if !strings.HasPrefix(f, "/") {
			return true
		}
		sawPath = true
		if strings.Contains(path.Base(f), "debian-archive") {
			return true
		}
	}
	return !sawPath
}

// parseOneLineSources parses the classic format:
//
//	deb [ key=value ... ] uri suite [component ...]
func parseOneLineSources(file, text string) []sourceEntry {
	var out []sourceEntry
	for _, line := range strings.Split(text, "\n") {
		if i := strings.IndexByte(line, '#'); i >= 0 {
			line = line[:i]
		}
		f := strings.Fields(line)
		if len(f) < 3 || f[0] != "deb" {
			continue
		}
		f = f[1:]
		e := sourceEntry{file: file}
		if strings.HasPrefix(f[0], "[") {
			// Options may be "[arch=amd64 signed-by=/x]" split over several fields.
			var opts []string
			for len(f) > 0 {
				tok := f[0]
				f = f[1:]
				opts = append(opts, strings.Trim(tok, "[]"))
				if strings.HasSuffix(tok, "]") {
					break
				}
			}
			for _, o := range opts {
				if k, v, ok := strings.Cut(o, "="); ok && strings.EqualFold(k, "signed-by") {
					e.signedBy = v
				}
			}
		}
		if len(f) < 2 {
			continue
		}
		e.uris = []string{f[0]}
		e.suites = []string{f[1]}
		out = append(out, e)
	}
	return out
}

// parseDeb822Sources parses the deb822 format: stanzas separated by blank
// lines, with Types, URIs, Suites, Enabled and Signed-By fields. Signed-By may
// hold an inline key over continuation lines.
func parseDeb822Sources(file, text string) []sourceEntry {
	var out []sourceEntry
	fields := map[string]string{}
	last := ""
	flush := func() {
		defer func() { fields = map[string]string{}; last = "" }()
		if len(fields) == 0 || strings.EqualFold(strings.TrimSpace(fields["enabled"]), "no") {
			return
		}
		isDeb := false
		for _, t := range strings.Fields(fields["types"]) {
			if t == "deb" {
				isDeb = true
			}
		}
		if !isDeb {
			return
		}
		out = append(out, sourceEntry{
			file:     file,
			uris:     strings.Fields(fields["uris"]),
			suites:   strings.Fields(fields["suites"]),
			signedBy: fields["signed-by"],
		})
	}
	for _, line := range strings.Split(text, "\n") {
		line = strings.TrimRight(line, "\r")
		switch {
		case strings.HasPrefix(line, "#"):
			continue
		case strings.TrimSpace(line) == "":
			flush()
		case line[0] == ' ' || line[0] == '\t':
			if last != "" {
				fields[last] += "\n" + strings.TrimSpace(line)
			}
		default:
			k, v, ok := strings.Cut(line, ":")
			if !ok {
				continue
			}
			last = strings.ToLower(strings.TrimSpace(k))
			fields[last] = strings.TrimSpace(v)
		}
	}
	flush()
	return out
}
