package nodeconfig

import (
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
)

// TestRedactedToken: a node file whose token secret is redacted is what a
// joined node keeps; only ParseJoined accepts it, and nothing can render a
// bootstrap kubeconfig from it.
func TestRedactedToken(t *testing.T) {
	data, err := os.ReadFile(filepath.Join("..", "..", "testdata", "node", "minimal.yaml"))
	if err != nil {
		t.Fatal(err)
	}
	redacted := regexp.MustCompile(`bootstrapToken: ([a-z0-9]{6})\.[a-z0-9]{16}`).ReplaceAllString(string(data), "bootstrapToken: $1.redacted")
	ps := Validate([]byte(redacted), "node.yaml")
	if len(ps) != 1 || !strings.Contains(ps[0].String(), "cluster.bootstrapToken: the secret is redacted") {
		t.Errorf("Validate of a redacted node file = %v", ps)
	}
	c, err := ParseJoined([]byte(redacted), "node.yaml")
	if err != nil {
		t.Fatalf("ParseJoined: %v", err)
	}
	if !c.Cluster.Redacted() || TokenSecret(c.Cluster.BootstrapToken) != "" {
		t.Errorf("token %q: Redacted %v", c.Cluster.BootstrapToken, c.Cluster.Redacted())
	}
	c.Cluster.CAData = "(the discovered CA)"
	if _, err := BootstrapKubeconfig(c); err == nil || !strings.Contains(err.Error(), "redacted") {
		t.Errorf("BootstrapKubeconfig from a redacted token: %v", err)
	}
	if TokenSecret("abcdef.0123456789abcdef") != "0123456789abcdef" {
		t.Error("TokenSecret")
	}
	// ParseJoined is as strict as Parse about everything else.
	if _, err := ParseJoined([]byte(clusterWith(good[0], good[1], "  bootstrapToken: abcdef.REDACTED")), "node.yaml"); err == nil {
		t.Error("ParseJoined accepted a malformed token")
	}
}

// TestTimesyncdDropIn: the metadata's servers become timesyncd's NTP=;
// without any the drop-in sets nothing (timesyncd's defaults), and the
// file is rendered either way, so its path is always the agent's.
func TestTimesyncdDropIn(t *testing.T) {
	f := facts
	f.NTPServers = []string{"ntp.cloud.aliyuncs.com", "100.100.3.1"}
	c := load(t, "minimal")
	c.Cluster.CAData = "(the discovered CA)"
	files, err := Render(c, f, f.PrivateIPv4, false)
	if err != nil {
		t.Fatal(err)
	}
	var got string
	for _, file := range files {
		if file.Path == TimesyncdDropIn {
			got = string(file.Data)
			if file.Mode != 0o644 {
				t.Errorf("mode %v", file.Mode)
			}
		}
	}
	if !strings.Contains(got, "[Time]\nNTP=ntp.cloud.aliyuncs.com 100.100.3.1\n") {
		t.Errorf("%s:\n%s", TimesyncdDropIn, got)
	}
	none := string(TimesyncdConfig(Facts{}))
	if !strings.Contains(none, "[Time]\n") || strings.Contains(none, "NTP=") {
		t.Errorf("without servers:\n%s", none)
	}
}
