package diff

import (
	"encoding/json"
	"fmt"
	"io"
	"strings"

	"github.com/drover-os/drover/internal/bytesize"
)

// Text writes the diff for a terminal: a header naming both images, one
// line per change ("+" added, "-" removed, "~" changed) and a summary line.
// Digests are shortened to 12 hex digits; JSON has them in full.
func (d *Diff) Text(w io.Writer) error {
	var b strings.Builder
	fmt.Fprintf(&b, "%s → %s\n", d.Old.label(), d.New.label())
	line := func(what, mark, text string) { fmt.Fprintf(&b, "%-13s %s %s\n", what, mark, text) }
	for _, c := range d.Inputs {
		line(c.What, "~", arrow(c.Old, c.New))
	}
	if d.Arch != nil {
		line("arch", "~", arrow(d.Arch.Old, d.Arch.New))
	}
	rebuilt, files := d.rebuilt()
	if rebuilt > 0 {
		line("package", "~", fmt.Sprintf("%d packages: the same versions built for %s%s", rebuilt, d.Arch.New, countText(files)))
	}
	for _, p := range d.Packages {
		if d.folded(p) {
			continue
		}
		mark, text := p.describe()
		line("package", mark, text)
	}
	for _, g := range d.Go {
		mark, text := g.describe()
		line("go", mark, text)
	}
	for _, u := range d.URLs {
		mark, text := u.describe()
		line("url", mark, text)
	}
	for _, c := range d.Images {
		mark, text := c.describe()
		line("image", mark, text)
	}
	if d.CacheDisk != nil {
		line("cache disk", "~", arrow(orNone(d.CacheDisk.Old), orNone(d.CacheDisk.New)))
	}
	for _, f := range d.Fixes {
		line(f.label(), f.mark(), f.describe())
		for _, l := range f.detailLines() {
			line("", " ", l)
		}
	}
	if d.Kernel != nil {
		line("kernel", "~", arrow(d.Kernel.Old, d.Kernel.New))
	}
	if d.Cmdline != nil {
		line("cmdline", "~", arrow(quote(d.Cmdline.Old), quote(d.Cmdline.New)))
	}
	if d.RootHash != nil {
		line("root hash", "~", arrow(d.RootHash.Old, d.RootHash.New))
	}
	listLines(d.Units, "unit", line)
	listLines(d.InitrdModules, "initrd module", line)
	listLines(d.Excluded, "excluded", line)
	listLines(d.Removed, "removed glob", line)
	listLines(d.Setuid, "setuid", line)
	for _, e := range d.ESP {
		text := e.Path
		if len(e.Details) > 0 {
			text += ": " + short(strings.Join(e.Details, ", "))
		}
		line("esp", mark(e.Change), text)
	}
	for _, f := range d.Files {
		line("file", mark(f.Change), f.describe())
	}
	for _, p := range d.Partitions {
		line("partition", "~", p.Name+": "+short(strings.Join(p.Details, ", ")))
	}
	if d.RootFS != nil {
		line("rootfs size", "~", d.RootFS.describe())
	}
	if d.Disk != nil {
		line("disk size", "~", d.Disk.describe())
	}
	fmt.Fprintf(&b, "summary: %s\n", d.Summary())
	_, err := io.WriteString(w, b.String())
	return err
}

// Summary is one line counting the changes: "1 package changed, 2 files
// changed, root hash changed", or "no differences".
func (d *Diff) Summary() string {
	if d.Equal() {
		return "no differences"
	}
	var parts []string
	// one and many are the phrase after the number: "package changed".
	count := func(n int, one, many string) {
		switch {
		case n == 1:
			parts = append(parts, "1 "+one)
		case n > 1:
			parts = append(parts, fmt.Sprintf("%d %s", n, many))
		}
	}
	flag := func(set bool, text string) {
		if set {
			parts = append(parts, text)
		}
	}
	for _, c := range d.Inputs {
		parts = append(parts, c.What+" changed")
	}
	flag(d.Arch != nil, "architecture changed")
	var pa, pr, pc int
	rebuilt, _ := d.rebuilt()
	for _, p := range d.Packages {
		switch {
		case d.folded(p):
		case p.Old == "":
			pa++
		case p.New == "":
			pr++
		default:
			pc++
		}
	}
	count(rebuilt, "package rebuilt for the other architecture", "packages rebuilt for the other architecture")
	count(pc, "package changed", "packages changed")
	count(pa, "package added", "packages added")
	count(pr, "package removed", "packages removed")
	count(len(d.Go), "Go component changed", "Go components changed")
	count(len(d.URLs), "URL component changed", "URL components changed")
	count(len(d.Images), "cached image changed", "cached images changed")
	flag(d.CacheDisk != nil, "cache disk changed")
	parts = append(parts, d.fixSummary()...)
	flag(d.Kernel != nil, "kernel changed")
	flag(d.Cmdline != nil, "command line changed")
	flag(d.RootHash != nil, "root hash changed")
	count(len(d.Units.Added)+len(d.Units.Removed), "unit enabled or disabled", "units enabled or disabled")
	flag(!d.InitrdModules.empty(), "initrd modules changed")
	count(len(d.Excluded.Added)+len(d.Excluded.Removed), "exclusion changed", "exclusions changed")
	count(len(d.Removed.Added)+len(d.Removed.Removed), "remove glob changed", "remove globs changed")
	count(len(d.Setuid.Added)+len(d.Setuid.Removed), "setuid file changed", "setuid files changed")
	count(len(d.ESP), "boot file changed", "boot files changed")
	grouped := FileCounts{}
	for _, p := range d.Packages {
		grouped = grouped.add(p.Files)
	}
	for _, g := range d.Go {
		grouped = grouped.add(g.Files)
	}
	for _, u := range d.URLs {
		grouped = grouped.add(u.Files)
	}
	grouped = grouped.add(d.ImageFiles)
	if n := len(d.Files) + grouped.total(); n > 0 {
		text := fmt.Sprintf("%d files changed", n)
		if n == 1 {
			text = "1 file changed"
		}
		if g := grouped.total(); g > 0 {
			text += fmt.Sprintf(" (%d listed, %d in changed components)", len(d.Files), g)
		}
		parts = append(parts, text)
	}
	count(len(d.Partitions), "partition differs", "partitions differ")
	flag(d.RootFS != nil, "rootfs size changed")
	flag(d.Disk != nil, "disk size changed")
	return strings.Join(parts, ", ")
}

// folded reports whether p is one of the packages that differ only by the
// architecture, which Text and Markdown count on one line.
func (d *Diff) folded(p PackageChange) bool { return d.Arch != nil && p.SameVersion }

// rebuilt counts the folded packages and their files.
func (d *Diff) rebuilt() (n int, files FileCounts) {
	for _, p := range d.Packages {
		if d.folded(p) {
			n++
			files = files.add(p.Files)
		}
	}
	return n, files
}

func (c FileCounts) add(o FileCounts) FileCounts {
	return FileCounts{c.Added + o.Added, c.Removed + o.Removed, c.Changed + o.Changed}
}

func (id Ident) label() string {
	s := id.Name + " " + id.Version
	if id.BuildID != "" {
		s += " (build " + id.BuildID + ")"
	}
	return s
}

func (p PackageChange) describe() (string, string) {
	switch {
	case p.Old == "":
		return "+", p.Name + " " + p.New + countText(p.Files)
	case p.New == "":
		return "-", p.Name + " " + p.Old + countText(p.Files)
	}
	text := p.Name + " " + arrow(p.Old, p.New)
	if p.Security {
		text += " [security]"
	}
	if p.Note != "" {
		text = p.Name + " " + p.Old + ": " + short(p.Note)
	}
	return "~", text + p.fileText()
}

// fileText is countText, but says so when a new version of a package left
// every file as it was (only its changelog, which is stripped, changed).
func (p PackageChange) fileText() string {
	if p.Old != "" && p.New != "" && p.Files.total() == 0 {
		return " (no file changed)"
	}
	return countText(p.Files)
}

func (g GoChange) describe() (string, string) {
	switch {
	case g.Old == nil:
		return "+", fmt.Sprintf("%s %s@%s (binary %s)%s", g.Name, g.New.Module, g.New.Version, short(g.New.SHA256), countText(g.Files))
	case g.New == nil:
		return "-", fmt.Sprintf("%s %s@%s%s", g.Name, g.Old.Module, g.Old.Version, countText(g.Files))
	}
	parts := fieldChanges(
		[3]string{"module", g.Old.Module, g.New.Module},
		[3]string{"version", g.Old.Version, g.New.Version},
		[3]string{"go", g.Old.GoVersion, g.New.GoVersion},
		[3]string{"binary", g.Old.SHA256, g.New.SHA256},
	)
	if n := len(g.DepsAdded) + len(g.DepsRemoved); n > 0 {
		parts = append(parts, fmt.Sprintf("deps +%d -%d", len(g.DepsAdded), len(g.DepsRemoved)))
	}
	return "~", g.Name + " " + short(strings.Join(parts, ", ")) + countText(g.Files)
}

func (u URLChange) describe() (string, string) {
	switch {
	case u.Old == nil:
		return "+", fmt.Sprintf("%s %s (sha256 %s)%s", u.Name, u.New.URL, short(u.New.SHA256), countText(u.Files))
	case u.New == nil:
		return "-", fmt.Sprintf("%s %s%s", u.Name, u.Old.URL, countText(u.Files))
	}
	parts := fieldChanges(
		[3]string{"url", u.Old.URL, u.New.URL},
		[3]string{"sha256", u.Old.SHA256, u.New.SHA256},
	)
	return "~", u.Name + " " + short(strings.Join(parts, ", ")) + countText(u.Files)
}

func (f FileChange) describe() string {
	switch f.Change {
	case Added:
		return fmt.Sprintf("%s (%s, %s %s %s)", f.Path, f.From, f.New.Kind, f.New.Mode, f.New.Owner)
	case Removed:
		return fmt.Sprintf("%s (%s)", f.Path, f.From)
	}
	return fmt.Sprintf("%s (%s): %s", f.Path, f.From, strings.Join(f.Details, ", "))
}

func (s SizeChange) describe() string {
	return fmt.Sprintf("%s → %s %s", bytesize.Format(s.Old), bytesize.Format(s.New), s.delta())
}

// delta is the signed difference: "(+12.0 KiB)".
func (s SizeChange) delta() string {
	d, sign := s.New-s.Old, "+"
	if d < 0 {
		d, sign = -d, "-"
	}
	return "(" + sign + bytesize.Format(d) + ")"
}

// countText renders a changed component's file counts: " (2 files
// changed)", " (3 files: 1 added, 2 changed)"; nothing when no file changed.
func countText(c FileCounts) string {
	files := func(n int) string {
		if n == 1 {
			return "1 file"
		}
		return fmt.Sprintf("%d files", n)
	}
	var parts []string
	for _, x := range []struct {
		n    int
		verb string
	}{{c.Added, Added}, {c.Removed, Removed}, {c.Changed, Changed}} {
		if x.n > 0 {
			parts = append(parts, fmt.Sprintf("%d %s", x.n, x.verb))
		}
	}
	switch len(parts) {
	case 0:
		return ""
	case 1:
		verb := parts[0][strings.IndexByte(parts[0], ' ')+1:]
		return " (" + files(c.total()) + " " + verb + ")"
	}
	return " (" + files(c.total()) + ": " + strings.Join(parts, ", ") + ")"
}

func listLines(l ListChange, what string, line func(what, mark, text string)) {
	for _, x := range l.Added {
		line(what, "+", x)
	}
	for _, x := range l.Removed {
		line(what, "-", x)
	}
	if l.Reordered {
		line(what, "~", "same modules, new load order")
	}
}

func mark(change string) string {
	switch change {
	case Added:
		return "+"
	case Removed:
		return "-"
	}
	return "~"
}

func arrow(old, new string) string { return short(old) + " → " + short(new) }

// orNone is s, or "none" for a side without the thing (no cache disk).
func orNone(s string) string {
	if s == "" {
		return "none"
	}
	return s
}

func quote(s string) string { return fmt.Sprintf("%q", s) }

// short abbreviates every 64-hex-digit word (a sha256) to its first 12
// digits, enough to tell digests apart at a glance.
func short(s string) string {
	words := strings.Split(s, " ")
	for i, w := range words {
		trail := ""
		if strings.HasSuffix(w, ")") || strings.HasSuffix(w, ",") {
			w, trail = w[:len(w)-1], w[len(w)-1:]
		}
		if len(w) == 64 && isHex(w) {
			words[i] = w[:12] + "…" + trail
		}
	}
	return strings.Join(words, " ")
}

func isHex(s string) bool {
	for _, c := range s {
		if (c < '0' || c > '9') && (c < 'a' || c > 'f') {
			return false
		}
	}
	return true
}

// JSON writes the diff as indented JSON with "equal" and "summary" first;
// field order is the struct's and every list is sorted, so the output is
// stable.
func (d *Diff) JSON(w io.Writer) error {
	out := struct {
		Equal   bool   `json:"equal"`
		Summary string `json:"summary"`
		*Diff
	}{d.Equal(), d.Summary(), d}
	b, err := json.MarshalIndent(out, "", "  ")
	if err != nil {
		return fmt.Errorf("rendering diff as JSON: %w", err)
	}
	_, err = w.Write(append(b, '\n'))
	return err
}
