package agent

import (
	"bytes"
	"compress/gzip"
	"context"
	"crypto/sha256"
	"encoding/base64"
	"encoding/hex"
	"encoding/json"
	"errors"
	"net/url"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/drover-os/drover/agent/nodeconfig"
	"github.com/drover-os/drover/internal/secretscan"
)

// tokenSecret is the secret half of userData's bootstrap token.
const tokenSecret = "0123456789abcdef"

func noSecretLeft(t *testing.T, root, when string) {
	t.Helper()
	hits, err := secretscan.Tree(root, []byte(tokenSecret))
	if err != nil {
		t.Fatal(err)
	}
	for _, h := range hits {
		t.Errorf("%s: the bootstrap token's secret is in %s", when, h)
	}
}

func reboot(r *rig) {
	os.RemoveAll(filepath.Join(r.root, "etc")) // /etc is a fresh tmpfs; /var persists
	os.RemoveAll(filepath.Join(r.root, "run"))
	r.log = nil
}

// TestTokenRedactedAfterJoin: once the kubelet has its certificate the
// token is gone from everything the node keeps, the guard's record follows
// the redacted node file, and a reboot with the same user-data is neither
// refused nor re-bootstrapped.
func TestTokenRedactedAfterJoin(t *testing.T) {
	ud := userData(t, "hello")
	r := newRig(t, ud)
	a := r.agent()
	if err := a.Run(context.Background()); err != nil {
		t.Fatalf("%v\n%s", err, strings.Join(r.log, "\n"))
	}
	noSecretLeft(t, r.root, "first boot")
	if d, _ := os.ReadFile(filepath.Join(r.root, StoredDigest)); strings.TrimSpace(string(d)) != digest(ud) {
		t.Errorf("%s = %q, want the digest of the user-data as given", StoredDigest, d)
	}
	node, _ := os.ReadFile(filepath.Join(r.root, NodeFile))
	if !strings.Contains(string(node), "bootstrapToken: abcdef.redacted") {
		t.Errorf("node file not redacted:\n%s", node)
	}
	if d := CheckDrift(r.root, a.watch.list()); len(d) != 0 {
		t.Errorf("the redaction is reported as drift: %v", d)
	}
	st, _ := os.ReadFile(filepath.Join(r.root, ManagedFile))
	sum := sha256.Sum256(node)
	if !strings.Contains(string(st), hex.EncodeToString(sum[:])) {
		t.Errorf("%s does not record the redacted node file", ManagedFile)
	}

	reboot(r)
	if err := r.agent().Run(context.Background()); err != nil {
		t.Fatalf("second boot: %v\n%s", err, strings.Join(r.log, "\n"))
	}
	log := strings.Join(r.log, "\n")
	if strings.Contains(log, "REFUSED") || !strings.Contains(log, "the stored config confirmed against it is re-applied") {
		t.Errorf("second boot with the same user-data:\n%s", log)
	}
	if fileExists(filepath.Join(r.root, nodeconfig.BootstrapKubeconfigPath)) {
		t.Error("bootstrap kubeconfig written on a joined node")
	}
	noSecretLeft(t, r.root, "second boot")

	// A changed user-data is still refused against the original digest.
	reboot(r)
	r.prov.data = append(append([]byte(nil), ud...), ' ')
	if err := r.agent().Run(context.Background()); !errors.Is(err, ErrImmutable) {
		t.Fatalf("changed user-data: want ErrImmutable, got %v", err)
	}
	if !strings.Contains(strings.Join(r.log, "\n"), "REFUSED: user-data changed since first boot") {
		t.Errorf("changed user-data not refused:\n%s", strings.Join(r.log, "\n"))
	}
	noSecretLeft(t, r.root, "refused boot")
}

// TestExpiredCertificateBootstrapsAgain: with the client certificate
// expired, a later boot bootstraps with the token of the unchanged
// user-data (and redacts again); without that user-data it fails saying
// why, instead of starting a kubelet that cannot authenticate.
func TestExpiredCertificateBootstrapsAgain(t *testing.T) {
	ud := userData(t, "hello")
	r := newRig(t, ud)
	if err := r.agent().Run(context.Background()); err != nil {
		t.Fatal(err)
	}
	expire := func() {
		os.WriteFile(filepath.Join(r.root, KubeletCert), clientCert(time.Now().Add(-time.Minute)), 0o600)
	}
	expire()
	reboot(r)
	a := r.agent()
	var bootstrapKC []byte
	healthz := a.env.Healthz
	a.env.Healthz = func(ctx context.Context) error {
		bootstrapKC, _ = os.ReadFile(filepath.Join(r.root, nodeconfig.BootstrapKubeconfigPath))
		return healthz(ctx)
	}
	if err := a.Run(context.Background()); err != nil {
		t.Fatalf("%v\n%s", err, strings.Join(r.log, "\n"))
	}
	if !strings.Contains(string(bootstrapKC), "token: abcdef."+tokenSecret) {
		t.Errorf("no bootstrap kubeconfig with the user-data's token for the kubelet:\n%s", bootstrapKC)
	}
	if !strings.Contains(strings.Join(r.log, "\n"), "expired at") {
		t.Errorf("console does not say why it bootstraps again:\n%s", strings.Join(r.log, "\n"))
	}
	noSecretLeft(t, r.root, "after bootstrapping again")

	expire()
	reboot(r)
	r.prov.data, r.prov.present = nil, false // the metadata has no user-data any more
	r.sd.Calls = nil
	err := r.agent().Run(context.Background())
	if err == nil || !strings.Contains(err.Error(), "the instance has no user-data now, but it was provisioned from one") {
		t.Fatalf("want the missing user-data refused, got %v", err)
	}
	if fileExists(filepath.Join(r.root, NodeFile)) || r.sd.Called("start kubelet.service") {
		t.Error("something was applied or started without the user-data")
	}
}

// TestRedactionCoversEncodedAndRemoteNodeFiles: a gzip-compressed node
// file and one fetched from https are redacted too; the remote one's
// content-addressed copy is deleted (the config carries it inline,
// redacted) and nothing is fetched on the next boot.
func TestRedactionCoversEncodedAndRemoteNodeFiles(t *testing.T) {
	var cfg map[string]any
	json.Unmarshal(userData(t, "hello"), &cfg)
	files := cfg["storage"].(map[string]any)["files"].([]any)
	nodeEntry := files[0].(map[string]any)
	src := nodeEntry["contents"].(map[string]any)["source"].(string)
	node, _ := url.PathUnescape(strings.TrimPrefix(src, "data:,"))
	var z bytes.Buffer
	zw := gzip.NewWriter(&z)
	zw.Write([]byte(node))
	zw.Close()

	t.Run("gzip", func(t *testing.T) {
		nodeEntry["contents"] = map[string]any{"compression": "gzip", "source": "data:;base64," + base64.StdEncoding.EncodeToString(z.Bytes())}
		data, _ := json.Marshal(cfg)
		r := newRig(t, data)
		if err := r.agent().Run(context.Background()); err != nil {
			t.Fatalf("%v\n%s", err, strings.Join(r.log, "\n"))
		}
		noSecretLeft(t, r.root, "gzip node file")
		reboot(r)
		if err := r.agent().Run(context.Background()); err != nil {
			t.Fatalf("second boot: %v\n%s", err, strings.Join(r.log, "\n"))
		}
	})
	t.Run("https", func(t *testing.T) {
		sum := sha256.Sum256(z.Bytes())
		hash := "sha256-" + hex.EncodeToString(sum[:])
		nodeEntry["contents"] = map[string]any{"compression": "gzip", "source": "https://files.example.test/node.yaml.gz",
			"verification": map[string]any{"hash": hash}}
		data, _ := json.Marshal(cfg)
		r := newRig(t, data)
		f := &countingFetcher{body: z.Bytes()}
		for boot := 1; boot <= 2; boot++ {
			a := r.agent()
			a.env.Fetcher = f
			if err := a.Run(context.Background()); err != nil {
				t.Fatalf("boot %d: %v\n%s", boot, err, strings.Join(r.log, "\n"))
			}
			noSecretLeft(t, r.root, "remote node file")
			reboot(r)
		}
		// The second boot fetches the node file again, not to apply it
		// (the stored config carries it inline, redacted) but to confirm
		// that inline copy against the user-data's: nothing on /var may
		// vouch for itself.
		if f.gets != 2 {
			t.Errorf("%d fetches over two boots, want 2 (apply, then confirm)", f.gets)
		}
		if strings.Contains(strings.Join(r.log, "\n"), "DRIFT") {
			t.Errorf("the redacted remote node file is reported as drift:\n%s", strings.Join(r.log, "\n"))
		}
		if fileExists(filepath.Join(r.root, ContentsDir, hash)) {
			t.Errorf("the stored copy of the node file (with the token) is still in %s", ContentsDir)
		}
	})
}

// TestTimesyncdFromMetadata: the metadata's time servers are in timesyncd's
// drop-in when its start job is queued and when the kubelet starts (the
// two run side by side, in either order); without servers the join goes
// on with timesyncd's defaults and says so.
func TestTimesyncdFromMetadata(t *testing.T) {
	for _, tc := range []struct{ ntp, want, note string }{
		{"ntp.cloud.aliyuncs.com 100.100.3.1", "NTP=ntp.cloud.aliyuncs.com 100.100.3.1\n", ""},
		{"", "[Time]\n", "no time servers in the metadata"},
	} {
		r := newRig(t, userData(t, "hello"))
		r.prov.ntp = tc.ntp
		dropIn := filepath.Join(r.root, nodeconfig.TimesyncdDropIn)
		a := r.agent()
		var atKubelet []byte
		healthz := a.env.Healthz
		a.env.Healthz = func(ctx context.Context) error {
			atKubelet, _ = os.ReadFile(dropIn)
			return healthz(ctx)
		}
		done, release := runHeld(t, r, a, TimesyncdUnit, "start "+TimesyncdUnit, "timesyncd", "timesyncd was not started")
		atStart, _ := os.ReadFile(dropIn)
		release()
		if err := <-done; err != nil {
			t.Fatalf("%q: %v\n%s", tc.ntp, err, strings.Join(r.log, "\n"))
		}
		for when, got := range map[string][]byte{"timesyncd was started": atStart, "the kubelet started": atKubelet} {
			if !strings.HasSuffix(string(got), tc.want) || (tc.ntp == "" && strings.Contains(string(got), "NTP=")) {
				t.Errorf("%q: %s when %s:\n%s", tc.ntp, nodeconfig.TimesyncdDropIn, when, got)
			}
		}
		if tc.note != "" && !strings.Contains(strings.Join(r.log, "\n"), tc.note) {
			t.Errorf("%q: console does not say %q:\n%s", tc.ntp, tc.note, strings.Join(r.log, "\n"))
		}
	}
}

// TestReplaceScrubbed: the replaced file's data is overwritten before it is
// let go (read here through a descriptor kept open on it), the new one is
// in place; a file with another hard link is left alone.
func TestReplaceScrubbed(t *testing.T) {
	dir := t.TempDir()
	p := filepath.Join(dir, "config.ign")
	os.WriteFile(p, []byte("token "+tokenSecret), 0o600)
	old, err := os.Open(p)
	if err != nil {
		t.Fatal(err)
	}
	defer old.Close()
	if err := replaceScrubbed(p, []byte("token redacted"), 0o600); err != nil {
		t.Fatal(err)
	}
	buf := make([]byte, 64)
	n, _ := old.ReadAt(buf, 0)
	if !bytes.Equal(buf[:n], make([]byte, len("token "+tokenSecret))) {
		t.Errorf("the replaced file still holds %q", buf[:n])
	}
	if b, _ := os.ReadFile(p); string(b) != "token redacted" {
		t.Errorf("new contents %q", b)
	}

	linked := filepath.Join(dir, "linked")
	os.WriteFile(linked, []byte("shared "+tokenSecret), 0o644)
	os.Link(linked, filepath.Join(dir, "other-name"))
	if err := replaceScrubbed(linked, []byte("shared redacted"), 0o644); err != nil {
		t.Fatal(err)
	}
	if b, _ := os.ReadFile(filepath.Join(dir, "other-name")); string(b) != "shared "+tokenSecret {
		t.Errorf("a file another link names was zeroed: %q", b)
	}

	c := filepath.Join(dir, "sha256-x")
	os.WriteFile(c, []byte(tokenSecret), 0o600)
	held, _ := os.Open(c)
	defer held.Close()
	if err := removeScrubbed(c); err != nil || fileExists(c) {
		t.Fatalf("removeScrubbed: %v, exists %v", err, fileExists(c))
	}
	n, _ = held.ReadAt(buf, 0)
	if bytes.Contains(buf[:n], []byte(tokenSecret)) {
		t.Error("the removed file's data was not overwritten")
	}
}
