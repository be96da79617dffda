package ignition

import (
	"path"
	"strings"

	"github.com/coreos/go-systemd/v22/unit"
	"github.com/coreos/ignition/v2/config/util"
	"github.com/coreos/ignition/v2/config/v3_5/types"
)

const (
	// systemdDir is where the config's units go: /etc is the only place
	// systemd reads units from that a drover node can write.
	systemdDir = "/etc/systemd/system"
	// imageUnitDir is where the image's own units live (usr-merged Debian),
	// the target of an enable link for a unit the config does not carry.
	imageUnitDir  = "/usr/lib/systemd/system"
	defaultTarget = "multi-user.target"
)

func unitPath(name string) string { return systemdDir + "/" + name }

func dropinPath(unit, dropin string) string { return systemdDir + "/" + unit + ".d/" + dropin }

// enableLink is one symlink `systemctl enable` would create.
type enableLink struct {
	path, target string
}

// enableLinks computes what `systemctl enable` does from the [Install]
// section: one link per WantedBy= and RequiredBy= target. A unit without
// contents in the config (one shipped in the image) or without an [Install]
// section is wanted by multi-user.target, as the image cannot be read while
// planning.
func enableLinks(u types.Unit, all []types.Unit) []enableLink {
	name := u.Name
	file := u.Name // the unit file the link points to
	install := u.Contents
	if tmpl, inst, ok := splitInstance(u.Name); ok {
		file = tmpl
		if inst == "" {
			if inst = defaultInstance(u); inst == "" {
				return nil // refused by the policy
			}
			name = strings.Replace(u.Name, "@.", "@"+inst+".", 1)
		}
		if util.NilOrEmpty(install) {
			install = templateContents(tmpl, all)
		}
	}
	targetDir := imageUnitDir
	if hasContents(file, all) {
		targetDir = systemdDir
	}
	wanted, required := installTargets(install)
	if len(wanted) == 0 && len(required) == 0 {
		wanted = []string{defaultTarget}
	}
	var out []enableLink
	for _, t := range wanted {
		out = append(out, enableLink{systemdDir + "/" + t + ".wants/" + name, targetDir + "/" + file})
	}
	for _, t := range required {
		out = append(out, enableLink{systemdDir + "/" + t + ".requires/" + name, targetDir + "/" + file})
	}
	return out
}

// notBootTargets are targets a normal boot never reaches: a unit enabled
// only for them is not started by the agent either.
var notBootTargets = map[string]bool{
	"rescue.target": true, "emergency.target": true, "shutdown.target": true, "halt.target": true,
	"poweroff.target": true, "reboot.target": true, "kexec.target": true, "soft-reboot.target": true,
	"final.target": true, "umount.target": true, "sleep.target": true, "suspend.target": true,
	"hibernate.target": true, "hybrid-sleep.target": true, "suspend-then-hibernate.target": true,
	"initrd.target": true, "initrd-switch-root.target": true, "initrd-fs.target": true, "initrd-root-fs.target": true,
}

// startName is the unit the enable links make a boot start (an instance
// for a template), or "" when every link is for a target a normal boot
// does not reach.
func startName(links []enableLink) string {
	for _, l := range links {
		dir := path.Base(path.Dir(l.path)) // "<target>.wants" or "<target>.requires"
		target := strings.TrimSuffix(strings.TrimSuffix(dir, ".wants"), ".requires")
		if !notBootTargets[target] {
			return path.Base(l.path)
		}
	}
	return ""
}

// splitInstance splits "getty@tty1.service" into the template
// "getty@.service" and the instance "tty1".
func splitInstance(name string) (tmpl, inst string, ok bool) {
	at := strings.IndexByte(name, '@')
	dot := strings.LastIndexByte(name, '.')
	if at < 0 || dot < at {
		return "", "", false
	}
	return name[:at+1] + name[dot:], name[at+1 : dot], true
}

func isTemplate(name string) bool {
	_, inst, ok := splitInstance(name)
	return ok && inst == ""
}

func defaultInstance(u types.Unit) string {
	var inst string
	for _, o := range installOptions(u.Contents) {
		if o.Name == "DefaultInstance" {
			inst = strings.TrimSpace(o.Value)
		}
	}
	return inst
}

func templateContents(tmpl string, all []types.Unit) *string {
	for _, u := range all {
		if u.Name == tmpl {
			return u.Contents
		}
	}
	return nil
}

func hasContents(file string, all []types.Unit) bool {
	return !util.NilOrEmpty(templateContents(file, all))
}

// installTargets reads WantedBy= and RequiredBy=: space-separated lists
// that accumulate over lines, where an empty assignment resets the list.
func installTargets(contents *string) (wanted, required []string) {
	for _, o := range installOptions(contents) {
		var list *[]string
		switch o.Name {
		case "WantedBy":
			list = &wanted
		case "RequiredBy":
			list = &required
		default:
			continue
		}
		if strings.TrimSpace(o.Value) == "" {
			*list = nil
			continue
		}
		*list = append(*list, strings.Fields(o.Value)...)
	}
	return wanted, required
}

// installOptions returns the [Install] options; a unit that does not parse
// has none (Ignition has already reported it).
func installOptions(contents *string) []*unit.UnitOption {
	if util.NilOrEmpty(contents) {
		return nil
	}
	opts, err := unit.Deserialize(strings.NewReader(*contents))
	if err != nil {
		return nil
	}
	var out []*unit.UnitOption
	for _, o := range opts {
		if o.Section == "Install" {
			out = append(out, o)
		}
	}
	return out
}
