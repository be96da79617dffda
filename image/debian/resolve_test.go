package debian

import (
	"math/rand/v2"
	"reflect"
	"slices"
	"strings"
	"testing"

	"pault.ag/go/debian/dependency"
	"pault.ag/go/debian/version"
)

// testIndex builds a trixie/main index from stanzas; Architecture defaults
// to amd64.
func testIndex(t *testing.T, stanzas ...string) *Index {
	t.Helper()
	var b strings.Builder
	for _, s := range stanzas {
		s = strings.TrimSpace(s)
		if !strings.Contains(s, "Architecture:") {
			s += "\nArchitecture: amd64"
		}
		b.WriteString(s + "\n\n")
	}
	pkgs, err := ParseIndex([]byte(b.String()))
	if err != nil {
		t.Fatal(err)
	}
	return NewIndex("trixie", []string{"main"}, pkgs)
}

func names(c *Closure) string {
	var out []string
	for _, p := range c.Packages {
		out = append(out, p.Name+"="+p.Version)
	}
	return strings.Join(out, " ")
}

func TestResolve(t *testing.T) {
	tests := []struct {
		name    string
		index   []string
		roots   []string
		want    string            // names() of the closure
		why     map[string]string // selected entries of Why
		choices []Choice
	}{
		{
			name: "chain over Pre-Depends and Depends, Recommends ignored",
			index: []string{
				"Package: systemd\nVersion: 257.9-1\nPre-Depends: libc6 (>= 2.38)\nDepends: mount\nRecommends: dbus",
				"Package: libc6\nVersion: 2.41-12",
				"Package: mount\nVersion: 2.41-5\nDepends: libc6",
				"Package: dbus\nVersion: 1.16",
			},
			roots: []string{"systemd"},
			want:  "libc6=2.41-12 mount=2.41-5 systemd=257.9-1",
			why: map[string]string{
				"systemd": "requested by the recipe",
				"libc6":   "required by systemd 257.9-1 (Pre-Depends: libc6 (>= 2.38))",
				"mount":   "required by systemd 257.9-1 (Depends: mount)",
			},
		},
		{
			name: "alternative: first satisfiable one",
			index: []string{
				"Package: app\nVersion: 1\nDepends: awk-new (>= 2) | mawk | gawk",
				"Package: awk-new\nVersion: 1",
				"Package: mawk\nVersion: 1.3",
				"Package: gawk\nVersion: 5",
			},
			roots: []string{"app"},
			want:  "app=1 mawk=1.3",
			why:   map[string]string{"mawk": "required by app 1 (Depends: awk-new (>= 2) | mawk | gawk)"},
		},
		{
			name: "alternative: one requested by the roots wins",
			index: []string{
				"Package: app\nVersion: 1\nDepends: mawk | gawk",
				"Package: mawk\nVersion: 1.3",
				"Package: gawk\nVersion: 5",
			},
			roots: []string{"app", "gawk"},
			want:  "app=1 gawk=5",
		},
		{
			name: "alternative: one already selected by another package wins",
			index: []string{
				"Package: a\nVersion: 1\nDepends: b",
				"Package: b\nVersion: 1\nDepends: gawk",
				"Package: c\nVersion: 1\nDepends: mawk | gawk",
				"Package: mawk\nVersion: 1.3",
				"Package: gawk\nVersion: 5",
			},
			roots: []string{"a", "c"},
			want:  "a=1 b=1 c=1 gawk=5",
		},
		{
			name: "versioned dependencies pick the highest version that satisfies",
			index: []string{
				"Package: app\nVersion: 1\nDepends: lib (<< 2.0)",
				"Package: tool\nVersion: 1\nDepends: other (>= 1:0.5)",
				"Package: lib\nVersion: 2.0-1",
				"Package: lib\nVersion: 1.9-1",
				"Package: lib\nVersion: 1.0-1",
				"Package: other\nVersion: 1:0.5~rc1",
				"Package: other\nVersion: 1:0.5",
			},
			roots: []string{"app", "tool"},
			want:  "app=1 lib=1.9-1 other=1:0.5 tool=1",
		},
		{
			name: "highest version and pinned root",
			index: []string{
				"Package: lib\nVersion: 1.0",
				"Package: lib\nVersion: 2.0",
				"Package: tool\nVersion: 3\nArchitecture: all",
				"Package: tool\nVersion: 2\nArchitecture: all",
			},
			roots: []string{"lib", "tool=2"},
			want:  "lib=2.0 tool=2",
		},
		{
			name: "virtual package with a single provider",
			index: []string{
				"Package: app\nVersion: 1\nDepends: debconf-2.0",
				"Package: debconf\nVersion: 1.5.91\nArchitecture: all\nProvides: debconf-2.0",
			},
			roots: []string{"app"},
			want:  "app=1 debconf=1.5.91",
			why:   map[string]string{"debconf": "provides debconf-2.0, required by app 1 (Depends: debconf-2.0)"},
		},
		{
			name: "versioned dependency needs a versioned provide",
			index: []string{
				"Package: app\nVersion: 1\nDepends: libfoo-abi (>= 2)",
				"Package: a-unversioned\nVersion: 9\nProvides: libfoo-abi",
				"Package: b-old\nVersion: 9\nProvides: libfoo-abi (= 1)",
				"Package: c-new\nVersion: 1\nProvides: libfoo-abi (= 2)",
			},
			roots: []string{"app"},
			want:  "app=1 c-new=1",
		},
		{
			name: "several providers: lexicographically first, recorded",
			index: []string{
				"Package: cron-daemon-user\nVersion: 1\nDepends: mail-transport-agent",
				"Package: postfix\nVersion: 3.10\nProvides: mail-transport-agent",
				"Package: exim4-daemon-light\nVersion: 4.98\nProvides: mail-transport-agent",
				"Package: dma\nVersion: 0.13\nProvides: mail-transport-agent",
			},
			roots: []string{"cron-daemon-user"},
			want:  "cron-daemon-user=1 dma=0.13",
			choices: []Choice{{
				Virtual: "mail-transport-agent", Chosen: "dma",
				Candidates: []string{"dma", "exim4-daemon-light", "postfix"},
				For:        "cron-daemon-user 1 (Depends: mail-transport-agent)",
			}},
		},
		{
			name: "several providers: the one another package needs anyway",
			index: []string{
				"Package: cron-daemon-user\nVersion: 1\nDepends: mail-transport-agent",
				"Package: mailer-frontend\nVersion: 1\nDepends: postfix (>= 3)",
				"Package: postfix\nVersion: 3.10\nProvides: mail-transport-agent",
				"Package: dma\nVersion: 0.13\nProvides: mail-transport-agent",
			},
			roots: []string{"cron-daemon-user", "mailer-frontend"},
			want:  "cron-daemon-user=1 mailer-frontend=1 postfix=3.10",
		},
		{
			name: "several providers: the one in the roots",
			index: []string{
				"Package: cron-daemon-user\nVersion: 1\nDepends: mail-transport-agent",
				"Package: postfix\nVersion: 3.10\nProvides: mail-transport-agent",
				"Package: dma\nVersion: 0.13\nProvides: mail-transport-agent",
			},
			roots: []string{"cron-daemon-user", "postfix"},
			want:  "cron-daemon-user=1 postfix=3.10",
		},
		{
			name: "virtual root",
			index: []string{
				"Package: postfix\nVersion: 3.10\nProvides: mail-transport-agent",
				"Package: dma\nVersion: 0.13\nProvides: mail-transport-agent",
			},
			roots: []string{"mail-transport-agent"},
			want:  "dma=0.13",
			why:   map[string]string{"dma": "provides mail-transport-agent, requested by the recipe"},
			choices: []Choice{{Virtual: "mail-transport-agent", Chosen: "dma",
				Candidates: []string{"dma", "postfix"}, For: "the recipe"}},
		},
		{
			name: "a real package beats providers of the same name",
			index: []string{
				"Package: app\nVersion: 1\nDepends: awk",
				"Package: awk\nVersion: 1",
				"Package: mawk\nVersion: 1.3\nProvides: awk",
			},
			roots: []string{"app"},
			want:  "app=1 awk=1",
		},
		{
			name: "cycles terminate",
			index: []string{
				"Package: a\nVersion: 1\nDepends: b",
				"Package: b\nVersion: 1\nPre-Depends: c\nDepends: a (>= 1)",
				"Package: c\nVersion: 1\nDepends: a | b",
			},
			roots: []string{"a"},
			want:  "a=1 b=1 c=1",
		},
		{
			name: "architecture qualifiers and restrictions",
			index: []string{
				"Package: app\nVersion: 1\nDepends: python3:any (>= 3.11), perl:native, libx [!amd64], liby [amd64 arm64], libz:amd64",
				"Package: python3\nVersion: 3.13.5\nMulti-Arch: allowed",
				"Package: perl\nVersion: 5.40",
				"Package: perl\nVersion: 5.99\nArchitecture: i386",
				"Package: libx\nVersion: 1",
				"Package: liby\nVersion: 1",
				"Package: libz\nVersion: 1\nArchitecture: all",
			},
			roots: []string{"app"},
			want:  "app=1 liby=1 libz=1 perl=5.40 python3=3.13.5",
		},
		{
			name: "a package may conflict with a virtual name it provides",
			index: []string{
				"Package: postfix\nVersion: 3.10\nProvides: mail-transport-agent\nConflicts: mail-transport-agent",
				"Package: old\nVersion: 1\nBreaks: postfix (<< 3)",
			},
			roots: []string{"postfix", "old"},
			want:  "old=1 postfix=3.10",
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			c, err := Resolve(testIndex(t, tt.index...), "amd64", tt.roots)
			if err != nil {
				t.Fatal(err)
			}
			if got := names(c); got != tt.want {
				t.Errorf("closure = %s\nwant      %s", got, tt.want)
			}
			for n, w := range tt.why {
				if c.Why[n] != w {
					t.Errorf("Why[%s] = %q, want %q", n, c.Why[n], w)
				}
			}
			for _, p := range c.Packages {
				if c.Why[p.Name] == "" {
					t.Errorf("no Why for %s", p.Name)
				}
			}
			if !reflect.DeepEqual(c.Choices, tt.choices) {
				t.Errorf("Choices = %#v\nwant %#v", c.Choices, tt.choices)
			}
		})
	}
}

func TestResolveDeterministic(t *testing.T) {
	idx := testIndex(t,
		"Package: a\nVersion: 1\nDepends: mta, b | c, d",
		"Package: b\nVersion: 1\nDepends: shell",
		"Package: c\nVersion: 1",
		"Package: d\nVersion: 1\nDepends: mta | b",
		"Package: e\nVersion: 1\nDepends: c | b, shell",
		"Package: x-mta\nVersion: 1\nProvides: mta",
		"Package: m-mta\nVersion: 1\nProvides: mta",
		"Package: z-mta\nVersion: 1\nProvides: mta",
		"Package: dash\nVersion: 1\nProvides: shell",
		"Package: bash\nVersion: 1\nProvides: shell",
	)
	roots := []string{"a", "e", "d", "c"}
	first, err := Resolve(idx, "amd64", roots)
	if err != nil {
		t.Fatal(err)
	}
	rng := rand.New(rand.NewPCG(1, 2))
	for range 50 {
		r := slices.Clone(roots)
		rng.Shuffle(len(r), func(i, j int) { r[i], r[j] = r[j], r[i] })
		got, err := Resolve(idx, "amd64", r)
		if err != nil {
			t.Fatal(err)
		}
		if !reflect.DeepEqual(got, first) {
			t.Fatalf("roots %v gave %s (%v), roots %v gave %s (%v)", r, names(got), got.Choices, roots, names(first), first.Choices)
		}
	}
	if names(first) != "a=1 bash=1 c=1 d=1 e=1 m-mta=1" {
		t.Errorf("closure = %s", names(first))
	}
}

func TestVersionOK(t *testing.T) {
	cases := []struct {
		have, op, want string
		ok             bool
	}{
		{"2.38-1", ">=", "2.38", true},
		{"2.38~rc1", ">=", "2.38", false},
		{"1:1.0", ">>", "9.9", true},
		{"1.0-1", "<<", "1.0-2", true},
		{"1.0-2", "<<", "1.0-2", false},
		{"1.0-2", "<=", "1.0-2", true},
		{"1.0-2", "=", "1.0-2", true},
		{"1.0-2+b1", "=", "1.0-2", false},
		{"1.0", "<", "1.0", true}, // obsolete spelling of <=
		{"1.0", ">", "1.0", true}, // obsolete spelling of >=
		{"1.0", ">>", "1.0", false},
	}
	for _, c := range cases {
		v, err := version.Parse(c.have)
		if err != nil {
			t.Fatal(err)
		}
		if got := versionOK(v, &dependency.VersionRelation{Operator: c.op, Number: c.want}); got != c.ok {
			t.Errorf("%s %s %s = %v, want %v", c.have, c.op, c.want, got, c.ok)
		}
	}
}

func TestClosureTotalSize(t *testing.T) {
	c := &Closure{Packages: []Package{{Size: 10}, {Size: 32}}}
	if c.TotalSize() != 42 {
		t.Errorf("TotalSize = %d", c.TotalSize())
	}
}
