package ignition

import (
	"bytes"
	"compress/gzip"
	"strings"
	"testing"
)

func gzipped(t testing.TB, b []byte) []byte {
	t.Helper()
	var buf bytes.Buffer
	zw := gzip.NewWriter(&buf)
	_, err := zw.Write(b)
	must(t, err)
	must(t, zw.Close())
	return buf.Bytes()
}

// TestOneLayerOfGzip: user-data compressed once is read; compressed twice
// it is refused, by Validate (drover validate) and Prepare (the agent)
// alike, since both read it through the one decoder.
func TestOneLayerOfGzip(t *testing.T) {
	cfg := []byte(`{"ignition":{"version":"3.4.0"},"storage":{"files":[{"path":"/etc/opt/motd","contents":{"source":"data:,hi"}}]}}`)
	if ps := Validate(gzipped(t, cfg), Options{}); len(ps) != 0 {
		t.Errorf("gzip once: %q", lines(ps))
	}
	const twice = "$: the user-data is compressed twice (gzip inside gzip); drover reads one layer of gzip, on a build host as on the node — compress it once"
	double := gzipped(t, gzipped(t, cfg))
	if ps := Validate(double, Options{}); len(ps) != 1 || ps[0].String() != twice {
		t.Errorf("gzip twice, Validate: %q", lines(ps))
	}
	if _, err := Prepare(t.Context(), double, Options{}); err == nil || !strings.Contains(err.Error(), twice) {
		t.Errorf("gzip twice, Prepare: %v", err)
	}
	if _, err := Parse(double); err == nil || !strings.Contains(err.Error(), "compress it once") {
		t.Errorf("gzip twice, Parse: %v", err)
	}
	if _, err := Redact(double, "hi", "redacted", nil); err == nil || !strings.Contains(err.Error(), "compress it once") {
		t.Errorf("gzip twice, Redact: %v", err)
	}
}

// TestRedactGzipConfig: the agent stores the user-data as given, gzip
// included; Redact reads it as Parse does and writes the redacted config
// as plain JSON, which Parse reads again.
func TestRedactGzipConfig(t *testing.T) {
	const secret = "0123456789abcdef"
	cfg := []byte(`{"ignition":{"version":"3.4.0"},"storage":{"files":[{"path":"/etc/opt/a","contents":{"source":"data:,t%3A%20abcdef.` + secret + `"}}]},` +
		`"systemd":{"units":[{"name":"x.service","contents":"[Service]\nEnvironment=T=` + secret + `\n"}]}}`)
	red, err := Redact(gzipped(t, cfg), secret, "redacted", nil)
	must(t, err)
	if !red.Changed || bytes.Contains(red.Config, []byte(secret)) || isGzip(red.Config) {
		t.Fatalf("changed %v:\n%q", red.Changed, red.Config)
	}
	if _, err := Parse(red.Config); err != nil {
		t.Errorf("the redacted config does not parse: %v", err)
	}
	// Nothing to redact: the stored bytes stay as they are, compressed.
	plain := gzipped(t, []byte(`{"ignition":{"version":"3.4.0"}}`))
	red, err = Redact(plain, secret, "redacted", nil)
	must(t, err)
	if red.Changed || !bytes.Equal(red.Config, plain) {
		t.Errorf("a config without the secret changed: %q", red.Config)
	}
}
