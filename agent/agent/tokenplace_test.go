package agent

import (
	"bytes"
	"compress/gzip"
	"context"
	"crypto/sha256"
	"encoding/base64"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/drover-os/drover/agent/ignition"
	"github.com/drover-os/drover/agent/nodeconfig"
)

func gzipped(t *testing.T, b []byte) []byte {
	t.Helper()
	var buf bytes.Buffer
	zw := gzip.NewWriter(&buf)
	if _, err := zw.Write(b); err != nil {
		t.Fatal(err)
	}
	if err := zw.Close(); err != nil {
		t.Fatal(err)
	}
	return buf.Bytes()
}

// TestGzipUserDataStoredAsGiven: the provider hands over gzip user-data
// as given; the agent stores it so, with the digest of those bytes, and
// the token is redacted from the compressed stored config too. A reboot
// with the same user-data is not taken for a change.
func TestGzipUserDataStoredAsGiven(t *testing.T) {
	ud := gzipped(t, userData(t, "hello"))
	r := newRig(t, ud)
	if err := r.agent().Run(context.Background()); err != nil {
		t.Fatalf("%v\n%s", err, strings.Join(r.log, "\n"))
	}
	if d, _ := os.ReadFile(filepath.Join(r.root, StoredDigest)); strings.TrimSpace(string(d)) != digest(ud) {
		t.Errorf("%s = %q, want the digest of the compressed user-data as given", StoredDigest, d)
	}
	noSecretLeft(t, r.root, "first boot, gzip user-data")
	reboot(r)
	if err := r.agent().Run(context.Background()); err != nil {
		t.Fatalf("second boot: %v\n%s", err, strings.Join(r.log, "\n"))
	}
	if log := strings.Join(r.log, "\n"); strings.Contains(log, "REFUSED") || !strings.Contains(log, "the stored config confirmed against it is re-applied") {
		t.Errorf("second boot with the same gzip user-data:\n%s", log)
	}
	noSecretLeft(t, r.root, "second boot, gzip user-data")
}

// TestDoubleGzipUserDataRefused: gzip inside gzip is refused on the node
// as drover validate refuses it, and nothing (no token) reaches /var.
func TestDoubleGzipUserDataRefused(t *testing.T) {
	r := newRig(t, gzipped(t, gzipped(t, userData(t, "hello"))))
	err := r.agent().Run(context.Background())
	if err == nil || !strings.Contains(err.Error(), "compressed twice (gzip inside gzip)") {
		t.Fatalf("want the compressed-twice refusal, got %v", err)
	}
	if fileExists(filepath.Join(r.root, StoredConfig)) {
		t.Error("a refused config was stored")
	}
	noSecretLeft(t, r.root, "refused double-gzip user-data")
}

// withToken is userData(t, "hello") with entries added to its storage and
// systemd sections; node, when set, replaces the node file's contents.
func withToken(t *testing.T, node string, files, links, units []any) []byte {
	t.Helper()
	var cfg map[string]any
	if err := json.Unmarshal(userData(t, "hello"), &cfg); err != nil {
		t.Fatal(err)
	}
	st := cfg["storage"].(map[string]any)
	fs := st["files"].([]any)
	if node != "" {
		fs[0].(map[string]any)["contents"] = map[string]any{"source": "data:;base64," + base64.StdEncoding.EncodeToString([]byte(node))}
	}
	st["files"] = append(fs, files...)
	if links != nil {
		st["links"] = links
	}
	if units != nil {
		cfg["systemd"] = map[string]any{"units": units}
	}
	b, _ := json.Marshal(cfg)
	return b
}

func file(p, source string, more ...any) map[string]any {
	f := map[string]any{"path": p, "contents": map[string]any{"source": source}}
	for i := 0; i+1 < len(more); i += 2 {
		f[more[i].(string)] = more[i+1]
	}
	return f
}

func b64(s string) string { return "data:;base64," + base64.StdEncoding.EncodeToString([]byte(s)) }

func escapeAll(s string) string {
	var b strings.Builder
	for _, c := range []byte(s) {
		fmt.Fprintf(&b, "%%%02X", c)
	}
	return b.String()
}

// TestTokenPlace: drover validate and the agent (one Options) refuse a
// config that would store the bootstrap token's secret anywhere but the
// node file, in any encoding, or keep the node file's data under another
// name; each problem is at the entry's JSON path, names the node path,
// says why and what to do, and never prints the secret.
func TestTokenPlace(t *testing.T) {
	token := "abcdef." + tokenSecret
	gz := gzipped(t, []byte("TOKEN="+token+"\n"))
	remote := []byte("join with " + token + "\n")
	sum := sha256.Sum256(remote)
	remoteHash := "sha256-" + hex.EncodeToString(sum[:])
	fetcher := ignition.MapFetcher{"https://files.example.test/join.env": remote}
	ca := testCA(t)
	nodeFile := func(tokenLine, extra string) string {
		return "apiVersion: drover.dev/v1alpha1\nkind: NodeConfig\ncluster:\n  server: https://10.0.2.2:6443\n  " + tokenLine + "\n  caData: |\n    " +
			strings.ReplaceAll(strings.TrimSpace(ca), "\n", "\n    ") + "\n" + extra
	}
	for _, tc := range []struct {
		name      string
		ud        []byte
		at, want  string // "" at: accepted
		noFetcher bool
		more      int // problems besides the one at at
	}{
		{name: "node file only", ud: withToken(t, "", nil, nil, nil)},
		{name: "symbolic link to the node file", ud: withToken(t, "", nil, []any{map[string]any{"path": "/var/lib/app/node.yaml", "target": NodeFile}}, nil)},
		{name: "plain copy", ud: withToken(t, "", []any{file("/var/lib/app/token", "data:,"+token)}, nil, nil),
			at: "$.storage.files[2].contents", want: "/var/lib/app/token would hold the bootstrap token's secret (plain)"},
		{name: "base64 copy", ud: withToken(t, "", []any{file("/etc/opt/app/env", "data:,T%3D"+base64.StdEncoding.EncodeToString([]byte(token)))}, nil, nil),
			at: "$.storage.files[2].contents", want: "/etc/opt/app/env would hold the bootstrap token's secret (base64 at 2 → plain)"},
		{name: "percent-encoded copy", ud: withToken(t, "", []any{file("/etc/opt/app/url", b64("https://x.test/?t="+escapeAll(token)))}, nil, nil),
			at: "$.storage.files[2].contents", want: "/etc/opt/app/url would hold the bootstrap token's secret (percent-encoded at 0 → plain)"},
		{name: "gzip data URL", ud: withToken(t, "", []any{file("/etc/opt/app/env", "data:;base64,"+base64.StdEncoding.EncodeToString(gz), "contents", map[string]any{"compression": "gzip", "source": "data:;base64," + base64.StdEncoding.EncodeToString(gz)})}, nil, nil),
			at: "$.storage.files[2].contents", want: "/etc/opt/app/env would hold the bootstrap token's secret (plain)"},
		{name: "gzip file", ud: withToken(t, "", []any{file("/var/lib/app/env.gz", "data:;base64,"+base64.StdEncoding.EncodeToString(gz))}, nil, nil),
			at: "$.storage.files[2].contents", want: "/var/lib/app/env.gz would hold the bootstrap token's secret (gzip at 0 → plain)"},
		{name: "appended to an image file", ud: withToken(t, "", []any{map[string]any{"path": "/etc/hosts", "append": []any{map[string]any{"source": b64("T=" + base64.StdEncoding.EncodeToString([]byte(token)) + "\n")}}}}, nil, nil),
			at: "$.storage.files[2].append[0]", want: "/etc/hosts would hold the bootstrap token's secret (base64 at 2 → plain)"},
		{name: "unit", ud: withToken(t, "", nil, nil, []any{map[string]any{"name": "join.service", "contents": "[Service]\nEnvironment=TOKEN=" + token + "\n"}}),
			at: "$.systemd.units[0].contents", want: "the unit /etc/systemd/system/join.service holds the bootstrap token's secret (plain)"},
		{name: "drop-in", ud: withToken(t, "", nil, nil, []any{map[string]any{"name": "containerd.service", "dropins": []any{map[string]any{"name": "10-t.conf", "contents": "[Service]\nEnvironment=NO_PROXY=" + base64.StdEncoding.EncodeToString([]byte(token)) + "\n"}}}}),
			at: "$.systemd.units[0].dropins[0].contents", want: "the drop-in /etc/systemd/system/containerd.service.d/10-t.conf holds the bootstrap token's secret (base64 at 31 → plain)"},
		{name: "remote contents", ud: withToken(t, "", []any{map[string]any{"path": "/var/lib/app/join.env", "contents": map[string]any{"source": "https://files.example.test/join.env", "verification": map[string]any{"hash": remoteHash}}}}, nil, nil),
			at: "$.storage.files[2].contents", want: "/var/lib/app/join.env would hold the bootstrap token's secret (plain)"},
		{name: "remote contents, not fetched (validate --offline)", noFetcher: true, ud: withToken(t, "", []any{map[string]any{"path": "/var/lib/app/join.env", "contents": map[string]any{"source": "https://files.example.test/join.env", "verification": map[string]any{"hash": remoteHash}}}}, nil, nil)},
		{name: "secret in a URL", noFetcher: true, ud: withToken(t, "", []any{map[string]any{"path": "/var/lib/app/x", "contents": map[string]any{"source": "https://files.example.test/x?t=" + token, "verification": map[string]any{"hash": remoteHash}}}}, nil, nil),
			at: "$.storage.files[2].contents", want: "the URL of the contents of /var/lib/app/x holds the bootstrap token's secret (plain); the stored config keeps the URL as given"},
		{name: "secret in a path", ud: withToken(t, "", []any{file("/var/lib/app/"+tokenSecret, "data:,x")}, nil, nil),
			at: "$.storage.files[2].contents", want: "the path /var/lib/app/<secret> would hold the bootstrap token's secret in a directory entry"},
		{name: "hard link to the node file", ud: withToken(t, "", nil, []any{map[string]any{"path": "/var/lib/app/node.yaml", "target": NodeFile, "hard": true}}, nil),
			at: "$.storage.links[0]", want: "the hard link /var/lib/app/node.yaml to /etc/drover/node.yaml names the data of the node file /etc/drover/node.yaml: the agent redacts the token by replacing that file, and the link would keep the old data, token included"},
		{name: "hard link through a symbolic link", ud: withToken(t, "", nil, []any{
			map[string]any{"path": "/etc/opt/app", "target": "../drover"},
			map[string]any{"path": "/var/lib/keep", "target": "/etc/opt/app/node.yaml", "hard": true}}, nil),
			at: "$.storage.links[1]", want: "the hard link /var/lib/keep to /etc/opt/app/node.yaml (through symbolic links, /etc/drover/node.yaml) names the data of the node file"},
		{name: "hard link to a hard link", ud: withToken(t, "", nil, []any{
			map[string]any{"path": "/var/lib/b", "target": "/var/lib/a", "hard": true},
			map[string]any{"path": "/var/lib/a", "target": NodeFile, "hard": true}}, nil),
			at: "$.storage.links[0]", want: "the hard link /var/lib/b to /var/lib/a names the data of the node file", more: 1},
		{name: "token escaped in the node file", ud: withToken(t, nodeFile(`bootstrapToken: "abcdef.0123456789\x61bcdef"`, ""), nil, nil, nil),
			at: "$.storage.files[0].contents", want: "the node file's cluster.bootstrapToken is not written plainly"},
		{name: "second, encoded copy in the node file", ud: withToken(t, nodeFile("bootstrapToken: "+token, "# "+base64.StdEncoding.EncodeToString([]byte(token))+"\n"), nil, nil, nil),
			at: "$.storage.files[0].contents", want: "/etc/drover/node.yaml holds the bootstrap token's secret a second time, encoded (base64 at"},
	} {
		opts := Options(fetcher)
		if tc.noFetcher {
			opts.Fetcher = nil
		}
		ps := ignition.Validate(tc.ud, opts)
		if tc.at == "" {
			if len(ps) != 0 {
				t.Errorf("%s: refused: %v", tc.name, ps)
			}
			continue
		}
		if len(ps) != 1+tc.more || ps[0].Path != tc.at || !strings.Contains(ps[0].Message, tc.want) {
			t.Errorf("%s: %v\nwant one problem at %s: %s", tc.name, ps, tc.at, tc.want)
			continue
		}
		msg := ps[0].Message
		if strings.Contains(msg, tokenSecret) {
			t.Errorf("%s: the message prints the secret: %s", tc.name, msg)
		}
		if !strings.Contains(msg, " — ") || (!strings.Contains(msg, "a credential that joins any node") && !strings.Contains(msg, "could not find it to redact it")) {
			t.Errorf("%s: the message does not say why and what to do: %s", tc.name, msg)
		}
	}
}

// TestTokenPlaceJoinedNode: the stored config of a joined node carries the
// redacted token; "redacted" elsewhere is not a secret to place.
func TestTokenPlaceJoinedNode(t *testing.T) {
	ud := withToken(t, "", []any{file("/etc/opt/app/note", "data:,"+nodeconfig.RedactedSecret)}, nil, nil)
	red, err := ignition.Redact(ud, tokenSecret, nodeconfig.RedactedSecret, nil)
	if err != nil || !red.Changed {
		t.Fatal(red.Changed, err)
	}
	opts := Options(nil)
	opts.Extra = joinedNodeFileCheck
	if ps := ignition.Validate(red.Config, opts); len(ps) != 0 {
		t.Errorf("the redacted stored config is refused: %v", ps)
	}
}
