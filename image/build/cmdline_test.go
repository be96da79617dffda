package build

import (
	"strings"
	"testing"

	"github.com/drover-os/drover/agent/boot"
	"github.com/drover-os/drover/image/recipe"
)

// TestKernelCmdline: the recipe's words, then systemd.import_credentials=no
// (after them, since systemd takes the last one), then the root hash
// (last, where drover-init and the tests look for it).
func TestKernelCmdline(t *testing.T) {
	const hash = "5c8d1e8b2bd0a5e0e2f2f7c6a0f3a6a4b2d7f0c1e3b5a7c9d1f3e5a7b9c1d3e5"
	for _, tc := range []struct {
		recipe []string
		want   string
	}{
		{nil, "systemd.import_credentials=no drover.roothash=" + hash},
		{[]string{"console=tty0", "console=ttyS0,115200"}, "console=tty0 console=ttyS0,115200 systemd.import_credentials=no drover.roothash=" + hash},
	} {
		// Room behind the recipe's words: appending to them in place would
		// write into the recipe's array.
		words := make([]string, len(tc.recipe), len(tc.recipe)+2)
		copy(words, tc.recipe)
		got := KernelCmdline(words, hash)
		if got != tc.want {
			t.Errorf("KernelCmdline(%q) = %q, want %q", tc.recipe, got, tc.want)
		}
		if spare := words[len(words):cap(words)]; strings.Join(spare, "") != "" {
			t.Errorf("KernelCmdline wrote into the recipe's array: %q", spare)
		}
		if c := boot.ParseCmdline(got); c.RootHash != hash {
			t.Errorf("drover-init reads root hash %q from %q", c.RootHash, got)
		}
	}
}

// TestSBATEntry: the recipe's generation and name reach the UKI's SBAT
// line, in shim's six-field form.
func TestSBATEntry(t *testing.T) {
	r, err := recipe.Parse("r.yaml", []byte("name: ecs-node\nsecureBoot:\n  sbatGeneration: 4\n"))
	if err != nil {
		t.Fatal(err)
	}
	if got, want := SBATEntry(r, "20261121.091544").String(), "drover,4,drover,ecs-node,20261121.091544,https://github.com/drover-os/drover\n"; got != want {
		t.Errorf("SBAT line %q, want %q", got, want)
	}
	r, _ = recipe.Parse("r.yaml", []byte("name: minimal\n"))
	if got := SBATEntry(r, "1").Generation; got != 1 {
		t.Errorf("default generation %d, want 1", got)
	}
}
