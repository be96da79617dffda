package nodeconfig

import (
	"os"
	"slices"
	"strings"
	"testing"
)

// TestKubeletFieldsCoverTheType: every field of KubeletConfiguration is
// classified exactly once, and the table names no field the type lacks.
// A kubelet module bump that adds a field fails here until someone decides
// whether a node file may set it.
func TestKubeletFieldsCoverTheType(t *testing.T) {
	seen := map[string]bool{}
	for _, f := range kubeletFields {
		if seen[f.name] {
			t.Errorf("%s classified twice", f.name)
		}
		seen[f.name] = true
		if f.why == "" || (f.drovers && f.instead == "") || (!f.drovers && f.instead != "") {
			t.Errorf("%s: a field needs a reason, and a drover field what to do instead: %+v", f.name, f)
		}
	}
	for name := range jsonFields(kubeletConfType) {
		if !seen[name] {
			t.Errorf("KubeletConfiguration.%s is not classified in kubeletFields (allowlist.go): decide whether kubelet.config may set it", name)
		}
		delete(seen, name)
	}
	for name := range seen {
		t.Errorf("kubeletFields lists %s, which KubeletConfiguration does not have", name)
	}
}

// TestKubeletInvariantFieldsAreDrovers: the settings the rendered file is
// checked for after the merge can only be reached through drover fields.
func TestKubeletInvariantFieldsAreDrovers(t *testing.T) {
	for _, inv := range kubeletInvariants {
		top, _, _ := strings.Cut(inv.field, ".")
		if _, drovers := droverKubeletField(top); !drovers {
			t.Errorf("invariant %s: kubelet.config may set %s", inv.field, top)
		}
	}
}

// TestKubeletFieldsOfTheIssue: the fields issue 33 names as drover's are.
func TestKubeletFieldsOfTheIssue(t *testing.T) {
	for _, name := range strings.Fields(`authentication authorization tlsMinVersion tlsCipherSuites tlsCertFile
		tlsPrivateKeyFile rotateCertificates serverTLSBootstrap staticPodPath staticPodURL staticPodURLHeader
		readOnlyPort port address healthzBindAddress healthzPort enableServer protectKernelDefaults
		makeIPTablesUtilChains enableDebuggingHandlers featureGates cgroupRoot cgroupDriver
		containerRuntimeEndpoint registerWithTaints volumePluginDir`) {
		if _, drovers := droverKubeletField(name); !drovers {
			t.Errorf("%s is permitted in kubelet.config", name)
		}
	}
	if _, drovers := droverKubeletField("fieldOfANewerKubelet"); !drovers {
		t.Error("a field the table does not know is permitted")
	}
	for _, name := range []string{"evictionSoft", "evictionSoftGracePeriod", "evictionHard", "kubeReserved", "serializeImagePulls", "allowedUnsafeSysctls"} {
		if _, drovers := droverKubeletField(name); drovers {
			t.Errorf("%s (set by the repo's node files) is refused", name)
		}
	}
}

const docsPath = "../../docs/node-config.md"

// TestKubeletFieldsTableInDocs: docs/node-config.md carries the table as
// kubeletFields makes it; -update rewrites it.
func TestKubeletFieldsTableInDocs(t *testing.T) {
	doc, err := os.ReadFile(docsPath)
	if err != nil {
		t.Fatal(err)
	}
	const begin, end = "<!-- kubelet-fields:begin -->\n", "<!-- kubelet-fields:end -->"
	head, rest, ok1 := strings.Cut(string(doc), begin)
	old, tail, ok2 := strings.Cut(rest, end)
	if !ok1 || !ok2 {
		t.Fatalf("%s has no %q … %q section", docsPath, begin, end)
	}
	want := KubeletFieldsTable()
	if *update {
		if err := os.WriteFile(docsPath, []byte(head+begin+want+end+tail), 0o644); err != nil {
			t.Fatal(err)
		}
		return
	}
	if old != want {
		t.Errorf("%s: the kubelet.config table differs from kubeletFields (run go test -run %s -update and review the diff)", docsPath, t.Name())
	}
	// Every row is in the table: a sanity check of the generator.
	if n := strings.Count(want, "\n| `"); n != len(kubeletFields) {
		t.Errorf("table has %d rows, want %d", n, len(kubeletFields))
	}
	if !slices.ContainsFunc(strings.Split(want, "\n"), func(l string) bool {
		return strings.HasPrefix(l, "| `staticPodPath` | drover's | ")
	}) {
		t.Error("staticPodPath is not a drover row")
	}
}
