package finalize

import (
	"strings"
	"testing"

	"github.com/drover-os/drover/image/tree"
)

// An image whose drover binaries come from a modified checkout says so in
// os-release; one that does not say where they came from adds nothing.
func TestOSReleaseNamesTheSource(t *testing.T) {
	for _, tc := range []struct{ source, want string }{
		{"github.com/drover-os/drover@0123abcd+dirty", "DROVER_SOURCE=\"github.com/drover-os/drover@0123abcd+dirty\"\n"},
		{"", ""},
	} {
		tr := tree.New()
		if err := (osRelease{}).Run(tr, &Env{Name: "n", Version: "1", BuildID: "b", Source: tc.source}); err != nil {
			t.Fatal(err)
		}
		got := string(tr.Get("/usr/lib/os-release").Data)
		if tc.want != "" && !strings.HasSuffix(got, tc.want) || tc.want == "" && strings.Contains(got, "DROVER_SOURCE") {
			t.Errorf("source %q: os-release\n%s", tc.source, got)
		}
	}
}
