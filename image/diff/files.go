package diff

import (
	"strconv"

	"github.com/drover-os/drover/image/build"
	"github.com/drover-os/drover/image/lock"
)

type lockURL = lock.URL

func itoa(n int64) string { return strconv.FormatInt(n, 10) }

// compareFiles lists every path added, removed or changed, by path.
func compareFiles(old, new []build.FileEntry) []FileChange {
	key := func(f build.FileEntry) string { return f.Path }
	om, nm := byName(old, key), byName(new, key)
	var out []FileChange
	for _, p := range unionKeys(om, nm) {
		o, inOld := om[p]
		n, inNew := nm[p]
		switch {
		case !inOld:
			out = append(out, FileChange{Path: p, Change: Added, From: n.From, Details: []string{}, New: &n})
		case !inNew:
			out = append(out, FileChange{Path: p, Change: Removed, From: o.From, Details: []string{}, Old: &o})
		default:
			details := fileDetails(o, n)
			if len(details) > 0 {
				out = append(out, FileChange{Path: p, Change: Changed, From: n.From, Details: details, Old: &o, New: &n})
			}
		}
	}
	return out
}

// fileDetails says what differs between two entries of the same path.
func fileDetails(o, n build.FileEntry) []string {
	var d []string
	if o.Kind != n.Kind {
		d = append(d, "kind "+o.Kind+" → "+n.Kind)
	} else if o.SHA256 != n.SHA256 {
		d = append(d, "content")
	}
	d = append(d, fieldChanges(
		[3]string{"mode", o.Mode, n.Mode},
		[3]string{"owner", o.Owner, n.Owner},
		[3]string{"target", o.Target, n.Target},
		[3]string{"from", o.From, n.From},
	)...)
	return d
}

// groupFiles counts each file change under the changed component that owns
// the path on both sides, and returns the others, which are listed one by
// one. A path whose owner changed is always listed: that move is itself
// worth a reviewer's eye.
func (d *Diff) groupFiles(all []FileChange) []FileChange {
	counts := map[string]*FileCounts{}
	for i := range d.Packages {
		counts[d.Packages[i].Name] = &d.Packages[i].Files
	}
	for i := range d.Go {
		counts["go:"+d.Go[i].Name] = &d.Go[i].Files
	}
	for i := range d.URLs {
		counts["url:"+d.URLs[i].Name] = &d.URLs[i].Files
	}
	if len(d.Images) > 0 {
		counts[imageOwner] = &d.ImageFiles
	}
	out := []FileChange{}
	for _, fc := range all {
		owner := fc.From
		if fc.Old != nil && fc.New != nil && fc.Old.From != fc.New.From {
			owner = ""
		}
		c := counts[owner]
		if c == nil {
			out = append(out, fc)
			continue
		}
		switch fc.Change {
		case Added:
			c.Added++
		case Removed:
			c.Removed++
		default:
			c.Changed++
		}
	}
	return out
}
