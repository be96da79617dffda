package ignition

import (
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"strings"
	"testing"
)

// TestCheckWrites: the hook sees every piece a config writes, with its
// JSON path — also the fragments appended to files whose final contents
// are unknown, remote contents once fetched (and flagged when not), units,
// drop-ins and links — and its problems are located in the document.
func TestCheckWrites(t *testing.T) {
	body := []byte("remote body\n")
	sum := sha256.Sum256(body)
	cfg := []byte(`{"ignition":{"version":"3.5.0"},"storage":{
"directories":[{"path":"/var/lib/app"}],
"files":[
 {"path":"/etc/opt/a","contents":{"source":"data:,A"}},
 {"path":"/etc/hosts","append":[{"source":"data:;base64,Zm9v"}]},
 {"path":"/var/lib/app/r","contents":{"source":"https://x.test/r?k=v","verification":{"hash":"sha256-` + hex.EncodeToString(sum[:]) + `"}}}],
"links":[{"path":"/var/lib/app/l","target":"/etc/opt/a"},{"path":"/var/lib/app/h","target":"/etc/opt/a","hard":true}]},
"systemd":{"units":[{"name":"x.service","contents":"[Service]\nExecStart=/bin/true\n","dropins":[{"name":"10-x.conf","contents":"[Service]\nNice=1\n"}]}]}}`)
	var seen []string
	opts := Options{CheckWrites: func(w Writes) []Problem {
		for _, e := range w.Entries {
			seen = append(seen, fmt.Sprintf("%s %s %s %q %q %v", e.At, e.Kind, e.Path, e.Data, e.Source, e.Unknown))
		}
		if _, ok := w.Files["/etc/opt/a"]; !ok {
			t.Errorf("Files lacks /etc/opt/a: %v", w.Files)
		}
		return []Problem{{Path: "$.storage.links[1]", Message: "refused"}, {Path: "elsewhere", Message: "also"}}
	}}
	ps := Validate(cfg, opts)
	want := []string{
		`$.storage.directories[0] directory /var/lib/app "" "" false`,
		`$.storage.files[0].contents file /etc/opt/a "A" "" false`,
		`$.storage.files[1].contents file /etc/hosts "" "" false`,
		`$.storage.files[1].append[0] append /etc/hosts "foo" "" false`,
		`$.storage.files[2].contents file /var/lib/app/r "" "https://x.test/r?k=v" true`,
		`$.storage.links[0] link /var/lib/app/l "/etc/opt/a" "" false`,
		`$.storage.links[1] hardlink /var/lib/app/h "/etc/opt/a" "" false`,
		`$.systemd.units[0].contents unit /etc/systemd/system/x.service "[Service]\nExecStart=/bin/true\n" "" false`,
		`$.systemd.units[0].dropins[0].contents dropin /etc/systemd/system/x.service.d/10-x.conf "[Service]\nNice=1\n" "" false`,
	}
	if strings.Join(seen, "\n") != strings.Join(want, "\n") {
		t.Errorf("entries:\n%s\nwant:\n%s", strings.Join(seen, "\n"), strings.Join(want, "\n"))
	}
	if len(ps) != 2 || ps[0].String() != "$.storage.links[1]: refused" || ps[0].Line != 7 || ps[1].String() != "elsewhere: also" {
		t.Errorf("problems %q (line %d)", lines(ps), ps[0].Line)
	}

	// Once fetched, the remote contents are known.
	seen = nil
	opts.Fetcher = MapFetcher{"https://x.test/r?k=v": body}
	Validate(cfg, opts)
	if w := `$.storage.files[2].contents file /var/lib/app/r "remote body\n" "https://x.test/r?k=v" false`; len(seen) < 5 || seen[4] != w {
		t.Errorf("fetched: %q, want %q", seen, w)
	}
}
