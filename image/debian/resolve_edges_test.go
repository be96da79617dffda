package debian

import (
	"fmt"
	"strings"
	"testing"
)

// TestResolveRootsEdges: roots are read as the recipe lists them: repeats
// of one spec are one root, a pin may name the archive's first stanza, and
// the first missing root (in name order) is the one reported.
func TestResolveRootsEdges(t *testing.T) {
	idx := testIndex(t, "Package: a\nVersion: 1.0", "Package: a\nVersion: 2.0", "Package: b\nVersion: 1")
	c, err := Resolve(idx, "amd64", []string{"a=1.0", " a = 1.0 ", "", "b", "b"})
	if err != nil || names(c) != "a=1.0 b=1" {
		t.Fatalf("Resolve = %v, %v", c, err)
	}
	if c.Why["a"] != requestedByRecipe || c.Why["b"] != requestedByRecipe {
		t.Errorf("Why = %v", c.Why)
	}
	_, err = Resolve(idx, "amd64", []string{"b=9", "aaa-missing"})
	if want := `package "aaa-missing" is not in trixie (components: main); check the recipe's packages list`; err == nil || err.Error() != want {
		t.Errorf("missing root: %v, want %q", err, want)
	}
	_, err = Resolve(idx, "amd64", []string{"b=9"})
	if want := `package "b" has no version "9" in trixie (components: main) (it has version 1 (amd64)); check the recipe's packages list`; err == nil || err.Error() != want {
		t.Errorf("missing version: %v, want %q", err, want)
	}
}

// TestResolveTiesKeepArchiveOrder: of two stanzas with one name and
// version (as two components can list), the first listed is taken, for a
// real package and for a provider alike.
func TestResolveTiesKeepArchiveOrder(t *testing.T) {
	idx := testIndex(t,
		"Package: app\nVersion: 1\nDepends: lib, virt",
		"Package: lib\nVersion: 1\nFilename: main/lib_1.deb",
		"Package: lib\nVersion: 1\nArchitecture: all\nFilename: contrib/lib_1.deb",
		"Package: prov\nVersion: 2\nProvides: virt\nFilename: main/prov_2.deb",
		"Package: prov\nVersion: 2\nProvides: virt\nFilename: contrib/prov_2.deb",
	)
	c, err := Resolve(idx, "amd64", []string{"app"})
	if err != nil {
		t.Fatal(err)
	}
	var got []string
	for _, p := range c.Packages {
		got = append(got, p.Name+":"+p.Filename)
	}
	if want := "app: lib:main/lib_1.deb prov:main/prov_2.deb"; strings.Join(got, " ") != want {
		t.Errorf("closure %q, want %q", strings.Join(got, " "), want)
	}
	if len(c.Choices) != 0 {
		t.Errorf("one provider name recorded as a choice: %v", c.Choices)
	}
}

// TestResolveVirtualRootSatisfiedByARealRoot: a virtual root that a real
// root provides adds nothing and records no choice.
func TestResolveVirtualRootSatisfiedByARealRoot(t *testing.T) {
	idx := testIndex(t,
		"Package: postfix\nVersion: 3.10\nProvides: mail-transport-agent",
		"Package: dma\nVersion: 0.13\nProvides: mail-transport-agent",
	)
	c, err := Resolve(idx, "amd64", []string{"mail-transport-agent", "postfix"})
	if err != nil || names(c) != "postfix=3.10" || len(c.Choices) != 0 {
		t.Fatalf("Resolve = %v, %v", c, err)
	}
	if _, err := Resolve(idx, "amd64", []string{"mail-transport-agent (>= 1)"}); err == nil {
		t.Error("a root that is not a package name resolved")
	}
}

// TestResolveProviderArchitecture: a provider of another architecture is
// not eligible, even for an ":any" dependency.
func TestResolveProviderArchitecture(t *testing.T) {
	for _, dep := range []string{"virt", "virt:any"} {
		idx := testIndex(t,
			"Package: app\nVersion: 1\nDepends: "+dep,
			"Package: a-prov\nVersion: 1\nArchitecture: arm64\nProvides: virt",
			"Package: b-prov\nVersion: 1\nArchitecture: all\nProvides: virt",
			"Package: c-prov\nVersion: 1\nArchitecture: amd64\nProvides: virt",
		)
		c, err := Resolve(idx, "amd64", []string{"app"})
		if err != nil || names(c) != "app=1 b-prov=1" {
			t.Fatalf("Depends: %s: Resolve = %v, %v", dep, c, err)
		}
		if len(c.Choices) != 1 || strings.Join(c.Choices[0].Candidates, " ") != "b-prov c-prov" {
			t.Errorf("Depends: %s: choices %+v, want b-prov among b-prov and c-prov", dep, c.Choices)
		}
	}
}

// TestUnsatisfiableDescribesProviders: the message lists each provider of
// a missing name with the version it provides.
func TestUnsatisfiableDescribesProviders(t *testing.T) {
	idx := testIndex(t,
		"Package: app\nVersion: 1\nDepends: libfoo-abi (>= 3)",
		"Package: a-prov\nVersion: 9\nProvides: libfoo-abi",
		"Package: b-prov\nVersion: 1\nProvides: libfoo-abi (= 2)",
	)
	_, err := Resolve(idx, "amd64", []string{"app"})
	want := `cannot satisfy "libfoo-abi (>= 3)" (Depends of app 1) in trixie: libfoo-abi is provided by a-prov 9 (unversioned), b-prov 1 (= 2); app was requested by the recipe: check the recipe's packages or pin other versions`
	if err == nil || err.Error() != want {
		t.Errorf("err = %v\nwant %s", err, want)
	}
}

// TestUnsatisfiableDeepChain: the chain that pulled a package in is given
// whole up to 65 steps, and cut there.
func TestUnsatisfiableDeepChain(t *testing.T) {
	for _, depth := range []int{64, 65, 66} {
		var stanzas []string
		for i := range depth {
			stanzas = append(stanzas, fmt.Sprintf("Package: p%02d\nVersion: 1\nDepends: p%02d", i, i+1))
		}
		_, err := Resolve(testIndex(t, stanzas...), "amd64", []string{"p00"})
		if err == nil {
			t.Fatalf("depth %d: resolved", depth)
		}
		_, chain, _ := strings.Cut(err.Error(), fmt.Sprintf("p%02d was ", depth-1))
		steps := strings.Count(chain, " ← ") + 1
		want := min(depth, 65)
		if steps != want {
			t.Errorf("depth %d: chain of %d steps, want %d: %s", depth, steps, want, chain)
		}
		if depth <= 65 && !strings.Contains(chain, "requested by the recipe:") {
			t.Errorf("depth %d: chain does not end at the recipe: %s", depth, chain)
		}
	}
}

// TestResolveArchQualifiedOnAll: "name:amd64" on an amd64 image accepts an
// Architecture: all package; "name:arm64" accepts neither it nor the
// native one.
func TestResolveArchQualifiedOnAll(t *testing.T) {
	idx := testIndex(t,
		"Package: app\nVersion: 1\nDepends: tzdata:amd64",
		"Package: tzdata\nVersion: 2025b\nArchitecture: all",
		"Package: cross\nVersion: 1\nDepends: tzdata:arm64",
		"Package: cross2\nVersion: 1\nDepends: lib:arm64",
		"Package: lib\nVersion: 1",
	)
	if c, err := Resolve(idx, "amd64", []string{"app"}); err != nil || names(c) != "app=1 tzdata=2025b" {
		t.Errorf("tzdata:amd64: %v, %v", c, err)
	}
	for _, root := range []string{"cross", "cross2"} {
		if c, err := Resolve(idx, "amd64", []string{root}); err == nil {
			t.Errorf("%s resolved to %s", root, names(c))
		}
	}
}
