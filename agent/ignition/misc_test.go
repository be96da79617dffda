package ignition

import (
	"bytes"
	"compress/gzip"
	"context"
	"net/http"
	"net/http/httptest"
	"os"
	"strings"
	"testing"

	"github.com/coreos/ignition/v2/config/v3_5/types"
)

func TestProblemsError(t *testing.T) {
	one := Problems{{Path: "$.a", Message: "bad"}}
	if got := one.Error(); got != "ignition config refused: $.a: bad" {
		t.Errorf("one: %q", got)
	}
	two := Problems{{Path: "$.a", Message: "bad"}, {Path: "$.b", Message: "worse"}}
	if got := two.Error(); got != "ignition config refused (2 problems):\n  $.a: bad\n  $.b: worse" {
		t.Errorf("two: %q", got)
	}
}

// TestProblemPosition: problems carry the line and column of the value.
func TestProblemPosition(t *testing.T) {
	data, err := os.ReadFile("../../testdata/ignition/28-path-outside.ign")
	must(t, err)
	ps := Validate(data, Options{})
	if len(ps) == 0 {
		t.Fatal("no problems")
	}
	p := ps[0]
	line := strings.Split(string(data), "\n")[p.Line-1]
	if p.Path != "$.storage.files[0].path" || !strings.HasPrefix(line[p.Column-1:], `"/usr/local/bin/x"`) {
		t.Errorf("%s at line %d column %d: %q", p.Path, p.Line, p.Column, line)
	}
}

// TestValidateOffline is drover validate on a build host: no Fetcher, so
// http(s) contents are judged but not fetched, and Extra sees the files
// whose contents are known.
func TestValidateOffline(t *testing.T) {
	data, err := os.ReadFile("../../testdata/ignition/07-spec-3.5.0-rich.ign")
	must(t, err)
	var seen []string
	extra := func(files map[string][]byte) []Problem {
		for p := range files {
			seen = append(seen, p)
		}
		return nil
	}
	if ps := Validate(data, Options{Extra: extra}); len(ps) != 0 {
		t.Fatalf("problems: %q", lines(ps))
	}
	joined := strings.Join(seen, " ")
	if !strings.Contains(joined, "/etc/drover/node.yaml") || strings.Contains(joined, "/etc/opt/motd") || strings.Contains(joined, "/etc/hosts") {
		t.Errorf("Extra saw %q: want node.yaml, not the unfetched /etc/opt/motd or the appended /etc/hosts", seen)
	}
	// Prepare without a Fetcher cannot plan the unfetched contents.
	if _, err := Prepare(context.Background(), data, Options{}); err == nil || !strings.Contains(err.Error(), "have not been fetched") {
		t.Errorf("Prepare without Fetcher: %v", err)
	}
}

// TestGzipBomb: decompressed user-data is bounded.
func TestGzipBomb(t *testing.T) {
	var buf bytes.Buffer
	zw := gzip.NewWriter(&buf)
	_, err := zw.Write(make([]byte, maxConfigSize+1))
	must(t, err)
	must(t, zw.Close())
	ps := Validate(buf.Bytes(), Options{})
	if len(ps) != 1 || ps[0].String() != "$: the user-data is gzip-compressed but does not decompress: more than 16 MiB decompressed — compress the config with gzip again" {
		t.Errorf("got %q", lines(ps))
	}
}

func TestHTTPFetcher(t *testing.T) {
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		switch r.URL.Path {
		case "/ok":
			w.Write([]byte("listen = 8080\n"))
		case "/big":
			w.Write(make([]byte, 100))
		default:
			http.NotFound(w, r)
		}
	}))
	defer srv.Close()
	f := &HTTPFetcher{Client: srv.Client(), MaxBytes: 50}
	ctx := context.Background()
	if b, err := f.Get(ctx, srv.URL+"/ok"); err != nil || string(b) != "listen = 8080\n" {
		t.Errorf("ok: %q %v", b, err)
	}
	if _, err := f.Get(ctx, srv.URL+"/missing"); err == nil || !strings.Contains(err.Error(), "404") {
		t.Errorf("missing: %v", err)
	}
	if _, err := f.Get(ctx, srv.URL+"/big"); err == nil || !strings.Contains(err.Error(), "larger than 50 bytes") {
		t.Errorf("big: %v", err)
	}

	// The whole agent path with a real HTTP server.
	cfg := `{"ignition":{"version":"3.5.0"},"storage":{"files":[{"path":"/etc/opt/app.conf","contents":{"source":"` + srv.URL +
		`/ok","verification":{"hash":"sha256-f4e0ac0e3e6eac559ce2427b4a3f8419cef8821bf96b2ea429f2aac70401fd5b"}}}]}}`
	plan, err := Prepare(ctx, []byte(cfg), Options{Fetcher: f})
	must(t, err)
	root := newRoot(t)
	_, err = Apply(plan, root)
	must(t, err)
	if b, err := os.ReadFile(root + "/etc/opt/app.conf"); err != nil || string(b) != "listen = 8080\n" {
		t.Errorf("/etc/opt/app.conf: %q %v", b, err)
	}
}

// TestEveryStableSpec: each stable spec in this Ignition is accepted, the
// experimental one is refused.
func TestEveryStableSpec(t *testing.T) {
	if Spec != types.MaxVersion.String() {
		t.Errorf("Spec %s, but the v3_5 package is %s", Spec, types.MaxVersion)
	}
	for _, v := range []string{"3.0.0", "3.1.0", "3.2.0", "3.3.0", "3.4.0", "3.5.0"} {
		if ps := Validate([]byte(`{"ignition":{"version":"`+v+`"}}`), Options{}); len(ps) != 0 {
			t.Errorf("%s: %q", v, lines(ps))
		}
	}
	for _, v := range []string{"3.6.0-experimental", "3.6.0", "3.5.1", "4.0.0"} {
		if ps := Validate([]byte(`{"ignition":{"version":"`+v+`"}}`), Options{}); len(ps) != 1 || ps[0].Path != "$.ignition.version" {
			t.Errorf("%s: %q", v, lines(ps))
		}
	}
}
