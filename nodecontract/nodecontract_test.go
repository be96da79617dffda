package nodecontract

import (
	"strings"
	"testing"

	"k8s.io/apimachinery/pkg/util/validation"
)

// The label is the one cut of the digest: a valid label value that still
// tells two configurations apart, and nothing for a damaged digest (the
// agent then sets no label rather than a wrong one).
func TestConfigLabel(t *testing.T) {
	ud := []byte(`{"ignition":{"version":"3.4.0"}}`)
	d, err := ConfigDigest(ud)
	if err != nil {
		t.Fatal(err)
	}
	l, err := UserDataLabel(ud)
	if err != nil {
		t.Fatal(err)
	}
	if l != ConfigLabel(d) || len(l) != ConfigLabelLen || !strings.HasPrefix(d, l) {
		t.Errorf("label %q of digest %q: want its first %d hex digits", l, d, ConfigLabelLen)
	}
	if errs := validation.IsValidLabelValue(l); len(errs) > 0 {
		t.Errorf("label %q: %v", l, errs)
	}
	if got := ConfigLabel(d[:ConfigLabelLen-1]); got != "" {
		t.Errorf("ConfigLabel of a %d-digit digest = %q, want \"\"", ConfigLabelLen-1, got)
	}
	for _, k := range []string{LabelBuildID, LabelNodeConfig} {
		if errs := validation.IsQualifiedName(k); len(errs) > 0 {
			t.Errorf("label key %q: %v", k, errs)
		}
	}
}
