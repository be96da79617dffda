package build

import (
	"fmt"
	"maps"
	"path"
	"slices"
	"strings"

	"github.com/drover-os/drover/image/recipe"
	"github.com/drover-os/drover/image/tree"
)

// CNIPlugins is what the image ships of the CNI plugins its packages
// install in recipe.CNIDir, and what it leaves out (recipe cni.plugins).
type CNIPlugins struct {
	Dir string `json:"dir"`
	// Packages are the packages that install them, "name version".
	Packages []string `json:"packages"`
	// Chosen is "recipe" when cni.plugins names them, "default" when the
	// recipe says nothing (recipe.DefaultCNIPlugins).
	Chosen  string      `json:"chosen"`
	Shipped []CNIPlugin `json:"shipped"`
	LeftOut []CNIPlugin `json:"leftOut"`
}

// CNIPlugin is one plugin file.
type CNIPlugin struct {
	Name  string `json:"name"`
	Bytes int64  `json:"bytes"`
}

// cniChoice works out, from the plugins the packages installed (name →
// node), which ship; it changes nothing. A chosen plugin no package offers
// is an error naming where it was written and what is offered.
func cniChoice(r *recipe.Recipe, offered map[string]*tree.Node, versions map[string]string) (*CNIPlugins, error) {
	want, named := r.CNIPlugins()
	if len(offered) == 0 {
		if named && len(want) > 0 {
			return nil, fmt.Errorf("%s:%d: cni.plugins: no package of the image installs CNI plugins in %s: add containernetworking-plugins to packages, or remove cni",
				r.CNI.From, r.CNI.Line, recipe.CNIDir)
		}
		return nil, nil // nothing to choose from, nothing to record
	}
	names := make([]string, 0, len(offered))
	pkgs := map[string]bool{}
	for name, n := range offered {
		names = append(names, name)
		pkgs[n.Owner+" "+versions[n.Owner]] = true
	}
	slices.Sort(names)
	from := slices.Sorted(maps.Keys(pkgs))
	c := &CNIPlugins{Dir: recipe.CNIDir, Packages: from, Chosen: "default", Shipped: []CNIPlugin{}, LeftOut: []CNIPlugin{}}
	if named {
		c.Chosen = "recipe"
	}
	var errs []string
	for i, p := range want {
		if offered[p] != nil {
			continue
		}
		if named {
			errs = append(errs, fmt.Sprintf("%s: cni.plugins[%d]: %q is not a CNI plugin of %s, which offers %s: fix the name, or install the plugin with a go, urls or files entry at %s",
				r.CNI.At[i], i, p, strings.Join(from, ", "), strings.Join(names, ", "), path.Join(recipe.CNIDir, p)))
		} else {
			errs = append(errs, fmt.Sprintf("%s: the default CNI plugins (%s) include %q, which %s does not offer (it has %s): list the plugins the image ships in cni.plugins",
				r.Path, strings.Join(want, ", "), p, strings.Join(from, ", "), strings.Join(names, ", ")))
		}
	}
	if len(errs) > 0 {
		return nil, fmt.Errorf("%s", strings.Join(errs, "\n"))
	}
	for _, name := range names {
		pl := CNIPlugin{Name: name, Bytes: int64(len(offered[name].Data))}
		if slices.Contains(want, name) {
			c.Shipped = append(c.Shipped, pl)
		} else {
			c.LeftOut = append(c.LeftOut, pl)
		}
	}
	return c, nil
}

// chooseCNIPlugins leaves out of the tree the CNI plugins the recipe does
// not choose. It runs right after the packages are unpacked, so it sees
// only theirs: a plugin a Go, URL or file component installs in the
// directory is the recipe's own and always ships.
func (b *builder) chooseCNIPlugins() error {
	offered := map[string]*tree.Node{}
	for _, p := range b.tree.Glob(path.Join(recipe.CNIDir, "*")) {
		if n := b.tree.Get(p); n != nil && n.Kind != tree.Dir {
			offered[path.Base(p)] = n
		}
	}
	versions := map[string]string{}
	for _, d := range b.p.Lock.Debs {
		versions[d.Name] = d.Version
	}
	c, err := cniChoice(b.p.Recipe, offered, versions)
	if err != nil || c == nil {
		return err
	}
	for _, pl := range c.LeftOut {
		p := path.Join(recipe.CNIDir, pl.Name)
		b.tree.Remove(p)
		b.leftOut[p] = "cni.plugins (" + c.Chosen + ") does not choose " + pl.Name
	}
	if len(c.Shipped) == 0 && len(b.tree.Glob(path.Join(recipe.CNIDir, "*"))) == 0 {
		b.tree.Remove(recipe.CNIDir)
	}
	names := make([]string, len(c.Shipped))
	for i, pl := range c.Shipped {
		names[i] = pl.Name
	}
	b.logf("build: cni plugins (%s): %s shipped, %d left out", c.Chosen, strings.Join(names, " "), len(c.LeftOut))
	b.man.CNI = c
	return nil
}
