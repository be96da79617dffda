package ignition

import (
	"fmt"
	"os"
	"strings"
	"testing"
)

// The docs' tables of what user-data may change are generated from the
// policy's own tables (extensionPoints, dropinDirectives, lifecycleKeys,
// securitySet), so the docs cannot promise what the code refuses or the
// other way round. Regenerate with
// go test ./agent/ignition -run TestDocsTables -update.

func code(s string) string { return "`" + s + "`" }

func cell(s string) string { return strings.ReplaceAll(s, "|", `\|`) }

// extensionPointsDoc is the long form, for docs/node-config.md.
func extensionPointsDoc() string {
	var b strings.Builder
	b.WriteString("| path | what it is for | what is checked | tmpfiles.d lines |\n|---|---|---|---|\n")
	for _, e := range extensionPoints() {
		p := code(e.pattern)
		if e.tree {
			p += " and below"
		}
		if len(e.except) > 0 {
			var x []string
			for _, d := range e.except {
				x = append(x, code(d))
			}
			p += ", except " + strings.Join(x, ", ")
		}
		tmp := "no"
		if e.tmpfiles {
			tmp = "yes"
		}
		fmt.Fprintf(&b, "| %s | %s | %s | %s |\n", p, cell(e.what), cell(e.checked), tmp)
	}
	b.WriteString("\nDrop-ins of `kubelet.service` and `containerd.service` may set only these directives:\n\n")
	b.WriteString("| section | directives | for |\n|---|---|---|\n")
	ds := dropinDirectives()
	for i := 0; i < len(ds); {
		j := i
		var keys []string
		for ; j < len(ds) && ds[j].section == ds[i].section && ds[j].why == ds[i].why; j++ {
			keys = append(keys, code(ds[j].key+"="))
		}
		fmt.Fprintf(&b, "| `[%s]` | %s | %s |\n", ds[i].section, strings.Join(keys, ", "), cell(ds[i].why))
		i = j
	}
	var units []string
	for _, g := range guardedUnits() {
		units = append(units, code(g.name))
	}
	fmt.Fprintf(&b, "\nNo unit or drop-in of any type may name %s (or a name the config gives one of them) in:\n\n", strings.Join(units, ", "))
	for _, k := range lifecycleKeys {
		fmt.Fprintf(&b, "- `%s=`: %s the protected unit\n", k.key, k.does)
	}
	b.WriteString("\nThe node's security set: no key of a sysctl.d file may reach one of these, spelt with dots or slashes, " +
		"with a leading `-`, or through a glob:\n\n| key | why the node keeps it |\n|---|---|\n")
	for _, s := range securitySet() {
		fmt.Fprintf(&b, "| %s | %s |\n", code(s.key), cell(s.why))
	}
	var names []string
	for _, n := range imageSysctlFiles {
		names = append(names, code(n))
	}
	fmt.Fprintf(&b, "\nA sysctl.d file may not take the name of one the image ships (%s): it would replace the image's whole.\n", strings.Join(names, ", "))
	return b.String()
}

// extensionPointsShort is the short form, for docs/agent.md.
func extensionPointsShort() string {
	var b strings.Builder
	b.WriteString("| extension point | for |\n|---|---|\n")
	for _, e := range extensionPoints() {
		p := code(e.pattern)
		if e.tree {
			p += "/…"
		}
		fmt.Fprintf(&b, "| %s | %s |\n", p, cell(e.what))
	}
	return b.String()
}

// TestDocsTables fails when a generated table in the docs differs from
// what the code says; -update rewrites it.
func TestDocsTables(t *testing.T) {
	for _, tc := range []struct{ file, name, body string }{
		{"../../docs/node-config.md", "extension points", extensionPointsDoc()},
		{"../../docs/agent.md", "extension points, short", extensionPointsShort()},
	} {
		data, err := os.ReadFile(tc.file)
		must(t, err)
		begin := "<!-- generated: " + tc.name + " (go test ./agent/ignition -run TestDocsTables -update) -->\n"
		end := "<!-- end generated: " + tc.name + " -->\n"
		doc := string(data)
		i, j := strings.Index(doc, begin), strings.Index(doc, end)
		if i < 0 || j < i {
			t.Errorf("%s: no %q … %q section", tc.file, strings.TrimSpace(begin), strings.TrimSpace(end))
			continue
		}
		want := doc[:i+len(begin)] + "\n" + tc.body + "\n" + doc[j:]
		if want == doc {
			continue
		}
		if *update {
			must(t, os.WriteFile(tc.file, []byte(want), 0o644))
			continue
		}
		t.Errorf("%s: the %s table differs from agent/ignition's (run go test ./agent/ignition -run TestDocsTables -update)", tc.file, tc.name)
	}
}
