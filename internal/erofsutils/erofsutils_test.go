//go:build integration

package erofsutils

import (
	"strings"
	"testing"
)

// TestTool: this host (after scripts/host-setup.sh) has a tool for every
// compression drover writes, and names no tool for one nothing reads.
func TestTool(t *testing.T) {
	for _, alg := range []string{"none", "lz4", "lz4hc", "zstd"} {
		for _, tool := range []string{"fsck.erofs", "dump.erofs"} {
			name, err := Tool(tool, alg)
			if err != nil {
				t.Errorf("%s for %s: %v", tool, alg, err)
				continue
			}
			t.Logf("%s for %s: %s", tool, alg, name)
		}
	}
	if name, err := Tool("fsck.erofs", "brotli"); err == nil || !strings.Contains(err.Error(), "host-setup.sh") {
		t.Errorf("brotli: %q, %v", name, err)
	}
}
