package userdata

import (
	"bytes"
	"compress/gzip"
	"testing"

	"github.com/drover-os/drover/nodecontract"
)

// The node-config label must stay put when only the bootstrap token
// rotates, and move with anything else in the user-data.
func TestConfigDigest(t *testing.T) {
	s, err := Load(samplePool)
	if err != nil {
		t.Fatal(err)
	}
	render := func(s Spec) []byte {
		t.Helper()
		b, err := Render(&s)
		if err != nil {
			t.Fatal(err)
		}
		return b
	}
	dig := func(b []byte) string {
		t.Helper()
		d, err := nodecontract.ConfigDigest(b)
		if err != nil {
			t.Fatal(err)
		}
		if len(d) != 64 {
			t.Fatalf("digest %q is not 64 hex digits", d)
		}
		return d
	}
	base := dig(render(*s))

	rotated := *s
	rotated.BootstrapToken = "zyxwvu.0123456789zyxwvu"
	if rotated.BootstrapToken == s.BootstrapToken {
		t.Fatal("the sample's token is the rotated one")
	}
	if got := dig(render(rotated)); got != base {
		t.Errorf("a rotated bootstrap token changed the digest: %s vs %s", got, base)
	}

	labelled := *s
	labelled.Labels = map[string]string{"pool": "other"}
	if got := dig(render(labelled)); got == base {
		t.Error("a new node label left the digest unchanged")
	}

	// The agent receives the user-data as the template carries it,
	// gzip-compressed or not; the digest is of those bytes.
	var gz bytes.Buffer
	zw := gzip.NewWriter(&gz)
	zw.Write(render(*s))
	zw.Close()
	if _, err := nodecontract.ConfigDigest(gz.Bytes()); err != nil {
		t.Errorf("gzip-compressed user-data: %v", err)
	}
	if _, err := nodecontract.ConfigDigest([]byte("#!/bin/sh\n")); err == nil {
		t.Error("a shell script was given a digest")
	}
}
