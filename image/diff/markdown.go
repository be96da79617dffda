package diff

import (
	"fmt"
	"io"
	"strings"

	"github.com/drover-os/drover/internal/bytesize"
)

// collapseAfter is the number of rows beyond which a list is folded into a
// <details> block, so a merge request shows the component changes first and
// long file lists on demand.
const collapseAfter = 10

// Markdown writes the diff for a merge request: a summary, then one headed
// section per kind of change, tables for components, and long lists folded
// into <details>.
func (d *Diff) Markdown(w io.Writer) error {
	var b strings.Builder
	fmt.Fprintf(&b, "## Image diff: %s → %s\n\n", md(d.Old.label()), md(d.New.label()))
	fmt.Fprintf(&b, "**Summary:** %s.\n", d.Summary())
	if d.Equal() {
		_, err := io.WriteString(w, b.String())
		return err
	}
	section := func(title string) { fmt.Fprintf(&b, "\n### %s\n\n", title) }

	if len(d.Inputs) > 0 {
		section("Inputs")
		rows := [][]string{}
		for _, c := range d.Inputs {
			rows = append(rows, []string{c.What, code(short(c.Old)), code(short(c.New))})
		}
		table(&b, []string{"input", "old", "new"}, rows)
	}
	if d.Arch != nil {
		section("Architecture")
		rebuilt, files := d.rebuilt()
		fmt.Fprintf(&b, "%s → %s: %d packages are the same versions built for %s%s.\n", code(d.Arch.Old), code(d.Arch.New),
			rebuilt, d.Arch.New, countText(files))
	}
	if len(d.Packages) > 0 {
		section("Packages")
		rows := [][]string{}
		for _, p := range d.Packages {
			if d.folded(p) {
				continue
			}
			note := strings.TrimSuffix(strings.TrimPrefix(p.fileText(), " ("), ")")
			if note == "" {
				note = "—"
			}
			if p.Note != "" {
				note = strings.TrimSpace(short(p.Note) + " " + note)
			}
			newCell := cell(p.New)
			if p.Security {
				newCell += " **security**"
			}
			rows = append(rows, []string{code(p.Name), cell(p.Old), newCell, note})
		}
		table(&b, []string{"package", "old", "new", "files"}, rows)
	}
	if len(d.Go) > 0 {
		section("Go components")
		rows := [][]string{}
		for _, g := range d.Go {
			rows = append(rows, []string{code(g.Name), goCell(g.Old), goCell(g.New), countCell(g.Files)})
		}
		table(&b, []string{"component", "old", "new", "files"}, rows)
	}
	if len(d.URLs) > 0 {
		section("URL components")
		rows := [][]string{}
		for _, u := range d.URLs {
			rows = append(rows, []string{code(u.Name), urlCell(u.Old), urlCell(u.New), countCell(u.Files)})
		}
		table(&b, []string{"component", "old", "new", "files"}, rows)
	}
	if len(d.Images) > 0 || d.CacheDisk != nil {
		section("Cached images")
		rows := [][]string{}
		for _, c := range d.Images {
			rows = append(rows, []string{code(c.Name), imageCell(c.Old), imageCell(c.New)})
		}
		if d.CacheDisk != nil {
			rows = append(rows, []string{"cache disk", code(short(d.CacheDisk.Old)), code(short(d.CacheDisk.New))})
		}
		table(&b, []string{"image", "old", "new"}, rows)
	}
	if len(d.Fixes) > 0 {
		section("What the new versions fix")
		d.fixesMarkdown(&b)
	}
	boot := [][]string{}
	if d.Kernel != nil {
		boot = append(boot, []string{"kernel", code(d.Kernel.Old), code(d.Kernel.New)})
	}
	if d.Cmdline != nil {
		boot = append(boot, []string{"command line", code(d.Cmdline.Old), code(d.Cmdline.New)})
	}
	if d.RootHash != nil {
		boot = append(boot, []string{"root hash", code(short(d.RootHash.Old)), code(short(d.RootHash.New))})
	}
	if d.RootFS != nil {
		boot = append(boot, []string{"rootfs size", bytesize.Format(d.RootFS.Old), bytesize.Format(d.RootFS.New) + " " + d.RootFS.delta()})
	}
	if d.Disk != nil {
		boot = append(boot, []string{"disk size", bytesize.Format(d.Disk.Old), bytesize.Format(d.Disk.New) + " " + d.Disk.delta()})
	}
	if len(boot) > 0 {
		section("Kernel, command line, root")
		table(&b, []string{"", "old", "new"}, boot)
	}
	if !d.Units.empty() {
		section("Enabled units")
		bullets(&b, listRows(d.Units))
	}
	if !d.InitrdModules.empty() {
		section("Initrd modules")
		bullets(&b, listRows(d.InitrdModules))
	}
	for _, l := range []struct {
		title string
		list  ListChange
	}{{"Excluded packages", d.Excluded}, {"Removed paths (recipe globs)", d.Removed}, {"Setuid and setgid files", d.Setuid}} {
		if !l.list.empty() {
			section(l.title)
			bullets(&b, listRows(l.list))
		}
	}
	if len(d.ESP) > 0 {
		section("Boot files (ESP)")
		rows := [][]string{}
		for _, e := range d.ESP {
			rows = append(rows, []string{code(e.Path), e.Change, short(strings.Join(e.Details, ", "))})
		}
		folded(&b, "boot files", []string{"path", "change", "details"}, rows)
	}
	if len(d.Files) > 0 {
		section("Files")
		rows := [][]string{}
		for _, f := range d.Files {
			what := strings.Join(f.Details, ", ")
			if f.Change == Added {
				what = fmt.Sprintf("%s %s %s", f.New.Kind, f.New.Mode, f.New.Owner)
			}
			rows = append(rows, []string{code(f.Path), f.Change, cell(f.From), cell(what)})
		}
		folded(&b, "files", []string{"path", "change", "from", "what"}, rows)
	}
	if len(d.Partitions) > 0 {
		section("Partitions")
		rows := [][]string{}
		for _, p := range d.Partitions {
			rows = append(rows, []string{code(p.Name), cell(short(strings.Join(p.Details, ", ")))})
		}
		table(&b, []string{"partition", "what"}, rows)
	}
	_, err := io.WriteString(w, b.String())
	return err
}

func table(b *strings.Builder, head []string, rows [][]string) {
	b.WriteString("| " + strings.Join(head, " | ") + " |\n|")
	for range head {
		b.WriteString("---|")
	}
	b.WriteString("\n")
	for _, r := range rows {
		b.WriteString("| " + strings.Join(r, " | ") + " |\n")
	}
}

// folded writes a table, inside <details> when it is long.
func folded(b *strings.Builder, what string, head []string, rows [][]string) {
	if len(rows) <= collapseAfter {
		table(b, head, rows)
		return
	}
	fmt.Fprintf(b, "<details><summary>%d %s</summary>\n\n", len(rows), what)
	table(b, head, rows)
	b.WriteString("\n</details>\n")
}

func bullets(b *strings.Builder, items []string) {
	for _, it := range items {
		b.WriteString("- " + it + "\n")
	}
}

func listRows(l ListChange) []string {
	var out []string
	for _, x := range l.Added {
		out = append(out, "added "+code(x))
	}
	for _, x := range l.Removed {
		out = append(out, "removed "+code(x))
	}
	if l.Reordered {
		out = append(out, "same modules, new load order")
	}
	return out
}

func goCell(s *GoSide) string {
	if s == nil {
		return "—"
	}
	return code(s.Module+"@"+s.Version) + " " + s.GoVersion + " " + code(short(s.SHA256))
}

func urlCell(s *URLSide) string {
	if s == nil {
		return "—"
	}
	return md(s.URL) + " " + code(short(s.SHA256))
}

func countCell(c FileCounts) string {
	if c.total() == 0 {
		return "—"
	}
	return strings.TrimSuffix(strings.TrimPrefix(countText(c), " ("), ")")
}

// cell renders a plain table cell: "—" for nothing, escaped otherwise.
func cell(s string) string {
	if s == "" {
		return "—"
	}
	return md(s)
}

// code renders s as inline code; a backtick inside would end it early, so
// it uses a longer fence then.
func code(s string) string {
	if s == "" {
		return "—"
	}
	s = strings.ReplaceAll(s, "|", `\|`)
	if strings.Contains(s, "`") {
		return "`` " + s + " ``"
	}
	return "`" + s + "`"
}

// md escapes what would break a table row or start markup.
func md(s string) string {
	r := strings.NewReplacer("|", `\|`, "<", "&lt;", ">", "&gt;", "*", `\*`, "_", `\_`, "`", "\\`")
	return r.Replace(s)
}
