package build

import (
	"strings"
	"testing"

	"github.com/drover-os/drover/image/lock"
	"github.com/drover-os/drover/image/recipe"
	"github.com/drover-os/drover/image/tree"
)

// debianCNI are the plugins trixie's containernetworking-plugins installs.
var debianCNI = []string{"bandwidth", "bridge", "dhcp", "firewall", "host-device", "host-local", "ipvlan", "loopback",
	"macvlan", "portmap", "ptp", "sbr", "static", "tuning", "vlan", "vrf"}

// cniBuilder is a builder whose tree holds what the packages unpacked:
// the given plugins of containernetworking-plugins and one other file.
func cniBuilder(t *testing.T, recipeYAML string, plugins []string) *builder {
	t.Helper()
	r, err := recipe.Parse("r.yaml", []byte(recipeYAML))
	if err != nil {
		t.Fatal(err)
	}
	tr := tree.New()
	for _, p := range plugins {
		if err := tr.Set(&tree.Node{Path: "/usr/lib/cni/" + p, Kind: tree.Regular, Mode: 0o755, Data: []byte(p), Owner: "containernetworking-plugins"}); err != nil {
			t.Fatal(err)
		}
	}
	if err := tr.Set(&tree.Node{Path: "/usr/bin/runc", Kind: tree.Regular, Mode: 0o755, Data: []byte("runc"), Owner: "runc"}); err != nil {
		t.Fatal(err)
	}
	l := &lock.Lock{Debs: []lock.Deb{{Name: "containernetworking-plugins", Version: "1.1.1+ds1-3+b17"}, {Name: "runc", Version: "1.1.15"}}}
	return &builder{p: &Plan{Recipe: r, Lock: l}, tree: tr, man: &Manifest{}, leftOut: map[string]string{}}
}

func inTree(b *builder) []string {
	var out []string
	for _, p := range b.tree.Glob("/usr/lib/cni/*") {
		out = append(out, strings.TrimPrefix(p, "/usr/lib/cni/"))
	}
	return out
}

func names(ps []CNIPlugin) string {
	var out []string
	for _, p := range ps {
		out = append(out, p.Name)
	}
	return strings.Join(out, " ")
}

// TestCNIPluginsChosen: the default and a recipe's list ship exactly their
// plugins; the rest leave the tree, are recorded in the manifest with
// their sizes, and are left-out paths for the needs check. The runtime's
// other files are untouched.
func TestCNIPluginsChosen(t *testing.T) {
	for _, tc := range []struct {
		name, yaml, chosen, shipped string
	}{
		{"default", "name: x\n", "default", "bridge host-local loopback portmap"},
		{"recipe", "name: x\ncni:\n  plugins: [ptp, loopback]\n", "recipe", "loopback ptp"},
		{"none", "name: x\ncni:\n  plugins: []\n", "recipe", ""},
	} {
		t.Run(tc.name, func(t *testing.T) {
			b := cniBuilder(t, tc.yaml, debianCNI)
			if err := b.chooseCNIPlugins(); err != nil {
				t.Fatal(err)
			}
			if got := strings.Join(inTree(b), " "); got != tc.shipped {
				t.Errorf("tree holds %q, want %q", got, tc.shipped)
			}
			c := b.man.CNI
			if c == nil {
				t.Fatal("no cni section in the manifest")
			}
			if c.Chosen != tc.chosen || names(c.Shipped) != tc.shipped || c.Dir != "/usr/lib/cni" ||
				strings.Join(c.Packages, ",") != "containernetworking-plugins 1.1.1+ds1-3+b17" {
				t.Errorf("manifest cni %+v", c)
			}
			if len(c.Shipped)+len(c.LeftOut) != len(debianCNI) || c.LeftOut[0].Name != "bandwidth" || c.LeftOut[0].Bytes != int64(len("bandwidth")) {
				t.Errorf("left out %+v", c.LeftOut)
			}
			if why := b.leftOut["/usr/lib/cni/dhcp"]; why != "cni.plugins ("+tc.chosen+") does not choose dhcp" {
				t.Errorf("needs check not told about dhcp: %q", why)
			}
			if _, ok := b.leftOut["/usr/lib/cni/loopback"]; ok == strings.Contains(tc.shipped, "loopback") {
				t.Errorf("left-out paths %v", b.leftOut)
			}
			if b.tree.Get("/usr/bin/runc") == nil {
				t.Error("a file outside /usr/lib/cni went")
			}
			if (b.tree.Get("/usr/lib/cni") == nil) != (tc.shipped == "") {
				t.Errorf("/usr/lib/cni kept %v with %q shipped: it goes only when empty", b.tree.Get("/usr/lib/cni") != nil, tc.shipped)
			}
		})
	}
}

// TestCNIPluginsRefused: a plugin no package offers is an error naming
// where it was written, the package and what it offers; so is a list
// with no package installing plugins, and a default the package no longer
// covers. Nothing is removed then.
func TestCNIPluginsRefused(t *testing.T) {
	for _, tc := range []struct {
		name, yaml string
		plugins    []string
		want       string
	}{
		{"unknown plugin", "name: x\ncni:\n  plugins:\n    - bridge\n    - flannel\n", debianCNI,
			`r.yaml:5: cni.plugins[1]: "flannel" is not a CNI plugin of containernetworking-plugins 1.1.1+ds1-3+b17, which offers ` +
				strings.Join(debianCNI, ", ") + `: fix the name, or install the plugin with a go, urls or files entry at /usr/lib/cni/flannel`},
		{"no plugins installed", "name: x\ncni:\n  plugins: [bridge]\n", nil,
			"r.yaml:3: cni.plugins: no package of the image installs CNI plugins in /usr/lib/cni: add containernetworking-plugins to packages, or remove cni"},
		{"default not offered", "name: x\n", []string{"bridge", "host-local", "loopback"},
			`r.yaml: the default CNI plugins (bridge, host-local, loopback, portmap) include "portmap", which containernetworking-plugins 1.1.1+ds1-3+b17 does not offer (it has bridge, host-local, loopback): list the plugins the image ships in cni.plugins`},
	} {
		t.Run(tc.name, func(t *testing.T) {
			b := cniBuilder(t, tc.yaml, tc.plugins)
			err := b.chooseCNIPlugins()
			if err == nil || err.Error() != tc.want {
				t.Fatalf("error\n got: %v\nwant: %s", err, tc.want)
			}
			if got := len(inTree(b)); got != len(tc.plugins) || b.man.CNI != nil {
				t.Errorf("a refused choice changed the tree (%d plugins left of %d) or the manifest (%+v)", got, len(tc.plugins), b.man.CNI)
			}
		})
	}
}

// TestCNIPluginsNone: an image whose packages install no plugins and whose
// recipe says nothing (or lists none) has no cni section.
func TestCNIPluginsNone(t *testing.T) {
	for _, y := range []string{"name: x\n", "name: x\ncni:\n  plugins: []\n"} {
		b := cniBuilder(t, y, nil)
		if err := b.chooseCNIPlugins(); err != nil || b.man.CNI != nil {
			t.Errorf("%q: error %v, manifest cni %+v", y, err, b.man.CNI)
		}
	}
}
