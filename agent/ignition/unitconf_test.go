package ignition

import "testing"

// TestForbiddenSettingSpellings: KUBELET_ARGS is found however a drop-in
// spells it with systemd's escapes, also when the escape is the last thing
// in the value, and an escape cut short or malformed is taken literally.
func TestForbiddenSettingSpellings(t *testing.T) {
	const refused = "KUBELET_ARGS (Environment=)"
	for _, tc := range []struct{ in, want string }{
		{`Environment=KUBELET_ARG\x53`, refused},
		{`Environment=KUBELET_ARG\123`, refused},
		{`Environment=KUBELET_ARG\u0053`, refused},
		{`Environment=KUBELET_ARG\U00000053`, refused},
		{`Environment=KUBELET\_ARGS=x`, refused},
		{`Environment='KUBELET_ARGS=x'`, refused},
		{`Environment="KUBELET_"'ARGS'=x`, refused},
		{`Environment=KUBELET_ARG\x5`, ""},
		{`Environment=KUBELET_ARG\xZZ`, ""},
		{`Environment=KUBELET_ARG\u005`, ""},
		{`Environment=KUBELET_ARG\12`, ""},
		{`Environment=KUBELET_ARG\9`, ""},
		{`Environment=A=b\`, ""},
	} {
		k, ok := forbiddenSetting(kubeletUnit, "[Service]\n"+tc.in)
		if (ok && k.show != tc.want) || (!ok && tc.want != "") {
			t.Errorf("forbiddenSetting(%q) = %q, %v; want %q", tc.in, k.show, ok, tc.want)
		}
	}
}
