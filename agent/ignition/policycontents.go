package ignition

import (
	"fmt"
	"path"

	"github.com/coreos/ignition/v2/config/util"
)

// checkKubeletDropins is parse's hook for the checks that read what the
// config writes (decoded by then): drop-ins of kubelet.service and
// containerd.service wherever systemd reads them for either (checkDropins),
// and tmpfiles.d files (checkTmpfiles). The name is parse's.
func checkKubeletDropins(cfg *Config, c *collector) {
	links := nodeResolver(cfg.Ignition.Storage.Links)
	aliases := unitAliases(cfg.Ignition.Storage.Links, links)
	checkDropins(cfg, aliases, c)
	checkUnitDependencies(cfg, aliases, c)
	checkUnitLinks(cfg, links, aliases, c)
	checkSysctl(cfg, c)
	checkTmpfiles(cfg, links, aliases, c)
}

// checkDropins refuses drop-ins of the checked units that set anything
// but the directives of dropinDirectives; checkedKeys words the refusal
// of the settings with which a drop-in would undo a guarantee (for the
// kubelet ExecStart=, EnvironmentFile= and an Environment= setting
// KUBELET_ARGS, with which it could pass --anonymous-auth=true or
// --read-only-port, the flags the node file may not set). Drop-ins given as storage files are judged
// by their inline contents; remote ones are refused, since the policy
// judges the config before anything is fetched.
func checkDropins(cfg *Config, aliases map[string]string, c *collector) {
	dropins := newDropinIndex(aliases)
	for i, u := range cfg.Ignition.Systemd.Units {
		for j, d := range u.Dropins {
			g, _, ok := dropins.of(dropinPath(u.Name, d.Name))
			if ok && g.checked && d.Contents != nil {
				checkDropinText(g.name, *d.Contents, []any{"systemd", "units", i, "dropins", j, "contents"}, c)
			}
		}
	}
	for i, f := range cfg.Ignition.Storage.Files {
		if i >= len(cfg.files) || !path.IsAbs(f.Path) {
			continue
		}
		p := path.Clean(f.Path)
		g, name, ok := dropins.of(p)
		if !ok || !g.checked || path.Base(p) == name+".d" {
			continue
		}
		at := []any{"storage", "files", i, "contents"}
		fc := cfg.files[i]
		if !fc.complete() {
			c.addf(at, "a %s drop-in must be given inline (a data: URL or systemd.units dropins), so that it can be checked against the directives its drop-ins may set (docs/node-config.md) — inline it", g.name)
			continue
		}
		checkDropinText(g.name, string(fc.final(nil)), at, c)
	}
}

func checkDropinText(unit, text string, at []any, c *collector) {
	k, ok := forbiddenSetting(unit, text)
	if !ok {
		return
	}
	instead := "set the kubelet's configuration in the node file's kubelet.config"
	if unit == containerdUnit {
		instead = "set containerd.sandboxImage and containerd.mirrors in the node file"
	}
	c.addf(at, "a %s drop-in may not set %s: %s — %s", unit, k.show, k.why, instead)
}

// tmpfilesGuard is what tmpfiles.d lines may not reach: the protected
// surface, every drop-in directory of the guarded units in every search
// directory under every name (a line cannot be checked as a drop-in
// file is), and tmpfiles.d itself.
func tmpfilesGuard(aliases map[string]string) surface {
	g := protectedSurface()
	for _, u := range guardedUnits() {
		instead := "give " + u.name + " drop-ins as files in " + systemdDir + "/" + u.name + ".d, where they are checked"
		if !u.checked {
			instead = insteadAgent
		}
		for _, n := range unitNames(u.name, aliases) {
			for _, d := range dropinDirNames(n) {
				for _, dir := range unitSearchDirs {
					if !underDir(dir, "/usr") {
						g = append(g, guarded{dir + "/" + d, true, "systemd reads " + d + " for " + u.name + "'s drop-ins", instead})
					}
				}
			}
		}
	}
	return append(g, guarded{tmpfilesDir, true, "more tmpfiles.d configuration, which no check reads", "give every tmpfiles.d file in the config"})
}

// checkTmpfiles reads every file the config gives for /etc/tmpfiles.d,
// directly or through a link there, and refuses the lines that would act
// on the protected surface (tmpfilesJudge).
func checkTmpfiles(cfg *Config, links resolver, aliases map[string]string, c *collector) {
	j := tmpfilesJudge{guard: tmpfilesGuard(aliases), links: links}
	budget := maxTmpfilesLines
	byPath := map[string]int{}
	for i, f := range cfg.Ignition.Storage.Files {
		if path.IsAbs(f.Path) {
			byPath[path.Clean(f.Path)] = i
		}
	}
	text := func(i int) (string, bool) {
		if i >= len(cfg.files) || !cfg.files[i].complete() {
			return "", false
		}
		return string(cfg.files[i].final(nil)), true
	}
	for i, f := range cfg.Ignition.Storage.Files {
		if !path.IsAbs(f.Path) || path.Dir(path.Clean(f.Path)) != tmpfilesDir {
			continue
		}
		at := []any{"storage", "files", i, "contents"}
		t, ok := text(i)
		if !ok {
			c.add("a tmpfiles.d file must be given inline (a data: URL), so that its lines can be checked — inline it", at...)
			continue
		}
		for _, msg := range tmpfilesProblems(j, t, &budget) {
			c.addf(at, "tmpfiles.d %s", msg)
		}
	}
	for i, l := range cfg.Ignition.Storage.Links {
		if l.Target == nil || !path.IsAbs(l.Path) {
			continue
		}
		p := path.Clean(l.Path)
		if p == tmpfilesDir {
			c.addf([]any{"storage", "links", i, "path"}, "%q would make %s a link; the tmpfiles.d files behind it could not be checked — give tmpfiles.d files in %s", l.Path, tmpfilesDir, tmpfilesDir)
			continue
		}
		if path.Dir(p) != tmpfilesDir {
			continue
		}
		at := []any{"storage", "links", i, "target"}
		t := linkTarget(p, *l.Target)
		if util.IsTrue(l.Hard) {
			t = links.resolveParent(t)
		} else {
			t = links.resolve(t)
		}
		if t == "/dev/null" {
			continue // masks a tmpfiles.d file of the image
		}
		f, ok := byPath[t]
		var body string
		if ok {
			body, ok = text(f)
		}
		if !ok {
			c.addf(at, "%q: a tmpfiles.d link must point to /dev/null (to mask a file) or to a file the config writes inline, so that its lines can be checked — write the file in %s", *l.Target, tmpfilesDir)
			continue
		}
		for _, msg := range tmpfilesProblems(j, body, &budget) {
			c.addf(at, "%q, read through this link as tmpfiles.d configuration: %s", t, msg)
		}
	}
}

// maxTmpfilesLines bounds the tmpfiles.d lines one config may give: each
// is matched against the surface, and no node needs more.
const maxTmpfilesLines = 4096

// tmpfilesProblems judges every line of a tmpfiles.d file; budget counts
// down the lines the config may still give.
func tmpfilesProblems(j tmpfilesJudge, text string, budget *int) []string {
	entries, errs := tmpfilesEntries(text)
	if *budget -= len(entries) + len(errs); *budget < 0 {
		return []string{fmt.Sprintf("the config's tmpfiles.d files have more than %d lines, more than the policy reads — give fewer lines", maxTmpfilesLines)}
	}
	var out []string
	for _, err := range errs {
		out = append(out, err.Error()+" — systemd-tmpfiles would skip it; fix or remove it")
	}
	for _, e := range entries {
		if msg := j.problem(e); msg != "" {
			out = append(out, msg)
		}
	}
	return out
}
