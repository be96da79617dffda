package debian

import (
	"strings"
	"testing"
)

func TestResolveErrors(t *testing.T) {
	tests := []struct {
		name  string
		index []string
		roots []string
		want  []string // substrings of the error
	}{
		{
			name:  "root not in the archive",
			index: []string{"Package: a\nVersion: 1"},
			roots: []string{"a", "nosuchpkg"},
			want:  []string{`package "nosuchpkg" is not in trixie (components: main); check the recipe's packages list`},
		},
		{
			name:  "pinned root version missing",
			index: []string{"Package: a\nVersion: 1.0", "Package: a\nVersion: 2.0"},
			roots: []string{"a=3.0"},
			want:  []string{`package "a" has no version "3.0" in trixie`, "2.0 (amd64), 1.0 (amd64)"},
		},
		{
			name:  "root listed twice with different versions",
			index: []string{"Package: a\nVersion: 1.0"},
			roots: []string{"a", "a=1.0"},
			want:  []string{`package "a" is listed twice`},
		},
		{
			name: "unsatisfiable version",
			index: []string{
				"Package: top\nVersion: 7\nDepends: app",
				"Package: app\nVersion: 1.0\nDepends: lib (>= 3)",
				"Package: lib\nVersion: 2.0",
				"Package: lib\nVersion: 1.0",
			},
			roots: []string{"top"},
			want: []string{
				`cannot satisfy "lib (>= 3)" (Depends of app 1.0) in trixie`,
				"lib has versions 2.0 (amd64), 1.0 (amd64)",
				"app was required by top 7 (Depends: app) ← requested by the recipe",
			},
		},
		{
			name: "missing dependency with alternatives",
			index: []string{
				"Package: app\nVersion: 1.0\nPre-Depends: nothere | notthere",
			},
			roots: []string{"app"},
			want: []string{`cannot satisfy "nothere | notthere" (Pre-Depends of app 1.0)`,
				"trixie has no package named nothere; trixie has no package named notthere"},
		},
		{
			name: "pinned root cannot satisfy a dependency",
			index: []string{
				"Package: app\nVersion: 1.0\nDepends: lib (>= 2)",
				"Package: lib\nVersion: 1.0",
				"Package: lib\nVersion: 2.0",
			},
			roots: []string{"app", "lib=1.0"},
			want:  []string{"lib 1.0 is already selected (requested by the recipe)"},
		},
		{
			name: "conflicts between roots",
			index: []string{
				"Package: systemd-sysv\nVersion: 257\nConflicts: sysvinit-core",
				"Package: sysvinit-core\nVersion: 3.14",
			},
			roots: []string{"systemd-sysv", "sysvinit-core"},
			want:  []string{"systemd-sysv 257 (Conflicts: sysvinit-core) and sysvinit-core 3.14 are both selected"},
		},
		{
			name: "versioned Breaks against a pulled-in package",
			index: []string{
				"Package: app\nVersion: 1\nDepends: lib",
				"Package: lib\nVersion: 1.0",
				"Package: newtool\nVersion: 2\nBreaks: lib (<< 2)",
			},
			roots: []string{"app", "newtool"},
			want:  []string{"newtool 2 (Breaks: lib (<< 2)) and lib 1.0 are both selected", "lib: required by app 1 (Depends: lib)"},
		},
		{
			name: "conflict through a virtual package",
			index: []string{
				"Package: postfix\nVersion: 3.10\nProvides: mail-transport-agent\nConflicts: mail-transport-agent",
				"Package: dma\nVersion: 0.13\nProvides: mail-transport-agent\nConflicts: mail-transport-agent",
			},
			roots: []string{"postfix", "dma"},
			want:  []string{"dma 0.13 (Conflicts: mail-transport-agent) and postfix 3.10 are both selected"},
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			c, err := Resolve(testIndex(t, tt.index...), "amd64", tt.roots)
			if err == nil {
				t.Fatalf("Resolve succeeded: %s", names(c))
			}
			for _, w := range tt.want {
				if !strings.Contains(err.Error(), w) {
					t.Errorf("error %q\nlacks %q", err, w)
				}
			}
		})
	}
}
