package finalize

import (
	"bufio"
	"bytes"
	"fmt"
	"path"
	"strings"

	"github.com/drover-os/drover/image/tree"
)

// units enables, disables and masks systemd units as the recipe says, the
// way `systemctl enable` would: symlinks in /etc/systemd/system from the
// unit's [Install] section. Debian's postinst scripts would have enabled
// units through deb-systemd-helper; drover enables only what the recipe
// names, so nothing (no getty, no sshd) runs by accident.
type units struct{}

func (units) String() string { return "units" }
func (units) Why() string {
	return "postinst scripts would enable units; the recipe says exactly which are enabled, disabled or masked"
}

var unitDirs = []string{"/etc/systemd/system", "/usr/lib/systemd/system"}

func findUnit(t *tree.Tree, name string) (string, *tree.Node) {
	for _, d := range unitDirs {
		p := d + "/" + name
		if n := t.Get(p); n != nil {
			return p, n
		}
		// Template instances (foo@bar.service) come from foo@.service.
		if at := strings.Index(name, "@"); at > 0 && !strings.Contains(name, "@.") {
			tp := d + "/" + name[:at+1] + name[strings.LastIndex(name, "."):]
			if n := t.Get(tp); n != nil {
				return p, n
			}
		}
	}
	return "", nil
}

func (units) Run(t *tree.Tree, env *Env) error {
	if err := t.Set(symlink("/etc/systemd/system/default.target", "/usr/lib/systemd/system/multi-user.target")); err != nil {
		return err
	}
	for _, name := range env.Enable {
		if err := enable(t, name, map[string]bool{}); err != nil {
			return err
		}
	}
	for _, name := range env.Disable {
		for _, p := range append(t.Glob("/etc/systemd/system/*.wants/"+name), t.Glob("/etc/systemd/system/*.requires/"+name)...) {
			t.Remove(p)
		}
	}
	for _, name := range env.Mask {
		if err := t.Set(mask(name)); err != nil {
			return err
		}
	}
	return nil
}

func enable(t *tree.Tree, name string, seen map[string]bool) error {
	if seen[name] {
		return nil
	}
	seen[name] = true
	p, n := findUnit(t, name)
	if n == nil {
		return fmt.Errorf("unit %s to enable is in no package of the image (looked in %s): add the package that ships it, or remove it from units.enable", name, strings.Join(unitDirs, ", "))
	}
	if n.Kind == tree.Symlink {
		target := n.Target
		if !path.IsAbs(target) {
			target = path.Join(path.Dir(p), target)
		}
		if tn := t.Get(target); tn != nil {
			n = tn
		}
	}
	install := parseInstall(n.Data)
	if len(install["WantedBy"])+len(install["RequiredBy"])+len(install["Alias"])+len(install["Also"]) == 0 {
		return fmt.Errorf("unit %s has no [Install] section: it is static and cannot be enabled; remove it from units.enable", name)
	}
	for _, kind := range []string{"WantedBy", "RequiredBy"} {
		suffix := map[string]string{"WantedBy": ".wants", "RequiredBy": ".requires"}[kind]
		for _, target := range install[kind] {
			if err := t.Set(symlink("/etc/systemd/system/"+target+suffix+"/"+name, p)); err != nil {
				return err
			}
		}
	}
	for _, alias := range install["Alias"] {
		if err := t.Set(symlink("/etc/systemd/system/"+alias, p)); err != nil {
			return err
		}
	}
	for _, also := range install["Also"] {
		if err := enable(t, also, seen); err != nil {
			return err
		}
	}
	return nil
}

// parseInstall reads the [Install] section of a unit file.
func parseInstall(data []byte) map[string][]string {
	out := map[string][]string{}
	in := false
	sc := bufio.NewScanner(bytes.NewReader(data))
	for sc.Scan() {
		line := strings.TrimSpace(sc.Text())
		if strings.HasPrefix(line, "[") {
			in = line == "[Install]"
			continue
		}
		k, v, ok := strings.Cut(line, "=")
		if !in || !ok {
			continue
		}
		out[strings.TrimSpace(k)] = append(out[strings.TrimSpace(k)], strings.Fields(v)...)
	}
	return out
}
