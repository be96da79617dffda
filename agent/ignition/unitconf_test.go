package ignition

import "testing"

// TestForbiddenSettingSpellings: KUBELET_ARGS is found however a drop-in
// spells it with systemd's escapes, also when the escape is the last thing
// in the value, and an escape cut short or malformed is taken literally:
// such a name is refused by the allowlist of variables instead, as any
// variable but the proxy ones is.
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
		{`Environment=KUBELET_ARG\x5`, "KUBELET_ARGx5 (Environment=)"},
		{`Environment=KUBELET_ARG\xZZ`, "KUBELET_ARGxZZ (Environment=)"},
		{`Environment=KUBELET_ARG\u005`, "KUBELET_ARGu005 (Environment=)"},
		{`Environment=KUBELET_ARG\12`, "KUBELET_ARG12 (Environment=)"},
		{`Environment=KUBELET_ARG\9`, "KUBELET_ARG9 (Environment=)"},
		{`Environment=A=b\`, "A (Environment=)"},
	} {
		k, ok := forbiddenSetting(kubeletUnit, "[Service]\n"+tc.in)
		if (ok && k.show != tc.want) || (!ok && tc.want != "") {
			t.Errorf("forbiddenSetting(%q) = %q, %v; want %q", tc.in, k.show, ok, tc.want)
		}
	}
}
