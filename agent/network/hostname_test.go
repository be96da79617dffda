package network

import (
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

func sprintf(f string, a ...any) string { return fmt.Sprintf(f, a...) }

func TestNormalizeHostname(t *testing.T) {
	label63 := strings.Repeat("a", 63)
	for _, tc := range []struct{ in, want, err string }{
		{in: "iZbp1abcdefghijklmnZ", want: "izbp1abcdefghijklmnz"},
		{in: "node-1", want: "node-1"},
		{in: "node-1.cluster.local.", want: "node-1.cluster.local"},
		{in: "1node", want: "1node"},
		{in: label63, want: label63},
		{in: "", err: "it is empty"},
		{in: label63 + "a", err: "longer than 63 characters"},
		{in: "-node", err: `label "-node" starts or ends with a hyphen`},
		{in: "node-", err: "starts or ends with a hyphen"},
		{in: "node_1", err: `label "node_1" contains '_'`},
		{in: "node..a", err: "empty label"},
		{in: "nodé", err: `contains 'é'`},
		{in: strings.Repeat("a.", 40) + "b", err: "the kernel allows 64: use a shorter name"},
		{in: strings.Repeat(label63+".", 4) + "a", err: "the limit is 253"},
	} {
		got, err := NormalizeHostname(tc.in)
		switch {
		case tc.err == "" && (err != nil || got != tc.want):
			t.Errorf("NormalizeHostname(%q) = %q, %v; want %q", tc.in, got, err, tc.want)
		case tc.err != "" && (err == nil || !strings.Contains(err.Error(), tc.err)):
			t.Errorf("NormalizeHostname(%q) = %q, %v; want an error with %q", tc.in, got, err, tc.err)
		}
	}
}

func TestSetHostnameRefusesBeforeTouchingAnything(t *testing.T) {
	root := t.TempDir()
	_, err := SetHostname(root, "bad_name", nil)
	if err == nil || !strings.HasPrefix(err.Error(), `network: setting the hostname: hostname "bad_name" is not a valid RFC 1123 host name`) {
		t.Fatalf("err = %v", err)
	}
	if _, err := os.Stat(filepath.Join(root, "etc/hostname")); !os.IsNotExist(err) {
		t.Errorf("etc/hostname written for an invalid name: %v", err)
	}
}
