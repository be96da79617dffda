package diff

import (
	"fmt"
	"html"
	"strings"
)

// maxIDs is how many CVE or GHSA IDs a terminal line or a table cell
// shows; Markdown's <details> and JSON list them all.
const maxIDs = 8

// label is the first column of a Fix's text line.
func (f Fix) label() string {
	if f.Kind == FixGo {
		return "release notes"
	}
	return "changelog"
}

// mark: "~" what the new version fixes, "-" what a downgrade loses, "?"
// nothing recorded to tell.
func (f Fix) mark() string {
	switch {
	case !f.Recorded:
		return "?"
	case f.Downgrade:
		return "-"
	}
	return "~"
}

// head is "glibc 2.41-12+deb13u4 → 2.41-12+deb13u5 (libc-bin, libc6;
// security update)".
func (f Fix) head() string {
	var in []string
	if len(f.Packages) != 1 || f.Packages[0] != f.Name {
		in = append(in, strings.Join(f.Packages, ", "))
	}
	if f.Security {
		in = append(in, "security update")
	}
	s := f.Name + " " + f.Old + " → " + f.New
	if len(in) > 0 {
		s += " (" + strings.Join(in, "; ") + ")"
	}
	return s
}

// what is "1 entry naming 14 CVEs", "downgrade, loses 2 entries naming 3
// CVEs", "2 releases naming 1 CVE and 3 GHSA IDs", followed by the notes.
func (f Fix) what() string {
	var parts []string
	if f.Recorded {
		n, unit := len(f.Entries), "entry"
		if f.Kind == FixGo {
			n, unit = len(f.Releases), "release"
		}
		s := plural(n, unit)
		var named []string
		if len(f.CVEs) > 0 {
			named = append(named, plural(len(f.CVEs), "CVE"))
		}
		if len(f.GHSAs) > 0 {
			named = append(named, plural(len(f.GHSAs), "GHSA ID"))
		}
		switch {
		case n > 0 && len(named) > 0:
			s += " naming " + strings.Join(named, " and ")
		case n > 0:
			s += ", no CVE named"
		}
		if f.Downgrade {
			s = "downgrade, loses " + s
		}
		parts = append(parts, s)
	} else if f.Downgrade {
		parts = append(parts, "downgrade")
	}
	return strings.Join(append(parts, f.Notes...), "; ")
}

// describe is the text line of a Fix.
func (f Fix) describe() string { return f.head() + ": " + f.what() }

// detailLines are the lines under a Fix in the text form: each entry with
// its CVE IDs (or its first line when it names none), each release that
// names IDs.
func (f Fix) detailLines() []string {
	var out []string
	for _, e := range f.Entries {
		s := e.Version + " (" + strings.TrimSuffix(e.Date.Format("2006-01-02")+", "+e.Distribution, ", ") + "): "
		if len(e.CVEs) > 0 {
			s += idList(e.CVEs, maxIDs)
		} else {
			first, _, _ := strings.Cut(e.Text, "\n")
			if len(first) > 80 {
				first = first[:77] + "…"
			}
			s += first
		}
		out = append(out, s)
	}
	for _, r := range f.Releases {
		if ids := append(append([]string{}, r.CVEs...), r.GHSAs...); len(ids) > 0 {
			out = append(out, r.Version+": "+idList(ids, maxIDs))
		}
	}
	return out
}

// idList joins IDs, the first max of them: "CVE-1, CVE-2, … (+3 more)".
func idList(ids []string, max int) string {
	if len(ids) <= max {
		return strings.Join(ids, ", ")
	}
	return strings.Join(ids[:max], ", ") + fmt.Sprintf(", … (+%d more)", len(ids)-max)
}

func plural(n int, unit string) string {
	switch {
	case n == 1:
		return "1 " + unit
	case strings.HasSuffix(unit, "y"):
		return fmt.Sprintf("%d %sies", n, unit[:len(unit)-1])
	}
	return fmt.Sprintf("%d %ss", n, unit)
}

// fixSummary is the summary's part on fixes: "fixes 14 CVEs in 2
// packages", "1 package downgraded (losing fixes of 3 CVEs)", "no
// changelog recorded for 1 package". Packages are Debian source packages
// and Go modules; a GHSA ID is counted apart from the CVE ID of the same
// advisory, which the notes do not pair.
func (d *Diff) fixSummary() []string {
	cves, ghsas, fixed, downgrades, lost, unrecorded := d.fixCounts()
	var parts []string
	if cves+ghsas > 0 {
		var named []string
		if cves > 0 {
			named = append(named, plural(cves, "CVE"))
		}
		if ghsas > 0 {
			named = append(named, plural(ghsas, "GHSA advisory"))
		}
		parts = append(parts, "fixes "+strings.Join(named, " and ")+" in "+plural(fixed, "package"))
	}
	if downgrades > 0 {
		s := plural(downgrades, "package") + " downgraded"
		if lost > 0 {
			s += " (losing fixes of " + plural(lost, "CVE") + ")"
		}
		parts = append(parts, s)
	}
	if unrecorded > 0 {
		parts = append(parts, "no changelog recorded for "+plural(unrecorded, "package"))
	}
	return parts
}

// fixesMarkdown writes the "What the new versions fix" section: a table,
// then each fix's entries (or releases) with their full text and IDs,
// folded.
func (d *Diff) fixesMarkdown(b *strings.Builder) {
	rows := [][]string{}
	for _, f := range d.Fixes {
		name := code(f.Name)
		if len(f.Packages) != 1 || f.Packages[0] != f.Name {
			name += " (" + md(strings.Join(f.Packages, ", ")) + ")"
		}
		if f.Security {
			name += " **security**"
		}
		ids := append(append([]string{}, f.CVEs...), f.GHSAs...)
		idCell := "—"
		if len(ids) > 0 {
			idCell = fmt.Sprintf("%d: %s", len(ids), idList(ids, maxIDs))
		}
		rows = append(rows, []string{name, cell(f.Old), cell(f.New), md(f.what()), idCell})
	}
	table(b, []string{"package", "old", "new", "changes", "CVE / GHSA"}, rows)
	for _, f := range d.Fixes {
		if len(f.Entries) == 0 && len(f.CVEs)+len(f.GHSAs) == 0 {
			continue
		}
		// Markdown is not rendered inside <summary>: HTML it is.
		fmt.Fprintf(b, "\n<details><summary><code>%s</code> %s → %s: %s</summary>\n", html.EscapeString(f.Name), html.EscapeString(f.Old),
			html.EscapeString(f.New), html.EscapeString(f.what()))
		for _, e := range f.Entries {
			b.WriteString("\n")
			about := []string{e.Date.Format("2006-01-02")}
			if e.Distribution != "" {
				about = append(about, md(e.Distribution))
			}
			if e.Urgency != "" {
				about = append(about, "urgency "+md(e.Urgency))
			}
			fmt.Fprintf(b, "**%s** (%s)", md(e.Version), strings.Join(about, ", "))
			if len(e.CVEs) > 0 {
				b.WriteString(": " + strings.Join(e.CVEs, ", "))
			}
			b.WriteString("\n\n" + fenced(e.Text))
			if e.CutLines > 0 {
				fmt.Fprintf(b, "\n(%s more in the changelog)\n", plural(e.CutLines, "line"))
			}
		}
		if len(f.Releases) > 0 {
			b.WriteString("\n")
		}
		for _, r := range f.Releases {
			if ids := append(append([]string{}, r.CVEs...), r.GHSAs...); len(ids) > 0 {
				fmt.Fprintf(b, "- **%s**: %s\n", md(r.Version), strings.Join(ids, ", "))
			}
		}
		b.WriteString("\n</details>\n")
	}
}

// fenced puts text in a code block whose fence is longer than any run of
// backticks in it.
func fenced(text string) string {
	fence := "```"
	for strings.Contains(text, fence) {
		fence += "`"
	}
	return fence + "text\n" + text + "\n" + fence + "\n"
}
