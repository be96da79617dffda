package ignition

import (
	"context"
	"path"
	"strings"

	"github.com/coreos/ignition/v2/config/util"
	"github.com/coreos/ignition/v2/config/v3_5/types"
)

// Extra checks the contents of the files a config writes; the caller plugs
// in checks owned by other packages (the node file /etc/drover/node.yaml is
// checked by agent/nodeconfig) without this package importing them.
// files maps each cleaned path to the contents it will have; files whose
// contents are only known on the node (kept, appended to, or not fetched
// because no Fetcher was given) are absent. A returned Problem's Path may be
// a JSON path or the address of a line inside a file.
type Extra func(files map[string][]byte) []Problem

// Options configure Validate and Prepare.
type Options struct {
	// Fetcher gets http(s) contents. Nil leaves them unfetched: drover
	// validate on a build host then judges everything but their hash.
	Fetcher Fetcher
	// Extra runs after the policy on the known file contents.
	Extra Extra
	// Contents, when set, is consulted before fetching and keeps what was
	// fetched and verified (the agent's /var/lib/drover/contents).
	Contents ContentCache
	// CheckWrites runs after Extra on everything the config writes, for
	// checks that need more than the files' final contents: where a piece
	// of data lands, the links, the units and their drop-ins.
	CheckWrites func(Writes) []Problem
}

// Writes is everything a config writes on the node, as known before
// Apply (remote contents once resolved).
type Writes struct {
	// Files is what Extra gets: the final contents of each file whose
	// contents are known.
	Files map[string][]byte
	// Entries are the pieces one by one, in config order: every file's
	// contents and append fragments (also of files whose final contents
	// are not known), units, drop-ins, links and directories.
	Entries []Write
}

// Write is one thing a config writes.
type Write struct {
	// At is the JSON path of the entry ("$.storage.files[2].append[0]"),
	// where a Problem about it is addressed.
	At string
	// Path is the node path it writes, cleaned.
	Path string
	// Kind is "file" (contents), "append", "unit", "dropin", "link",
	// "hardlink" or "directory".
	Kind string
	// Data is what lands at Path: the contents, decoded and decompressed,
	// or a link's target as given.
	Data []byte
	// Source is the URL contents come from unless it is a data: URL (whose
	// contents are Data); the stored config keeps it as given.
	Source string
	// Unknown is set for remote contents not fetched (Validate without a
	// Fetcher): Data is nil.
	Unknown bool

	at []any
}

// writes lists everything cfg writes, for Options.CheckWrites.
func (cfg *Config) writes() Writes {
	w := Writes{Files: cfg.knownFiles()}
	add := func(e Write) {
		if path.IsAbs(e.Path) {
			e.Path = path.Clean(e.Path)
			e.At = jsonPath(e.at)
			w.Entries = append(w.Entries, e)
		}
	}
	st := cfg.Ignition.Storage
	for i, d := range st.Directories {
		add(Write{Path: d.Path, Kind: "directory", at: []any{"storage", "directories", i}})
	}
	for i, f := range st.Files {
		at := []any{"storage", "files", i}
		if i >= len(cfg.files) {
			add(Write{Path: f.Path, Kind: "file", at: at})
			continue
		}
		fc := cfg.files[i]
		piece := func(kind string, r resolved, res types.Resource, at []any) {
			src := ""
			if res.Source != nil && !strings.HasPrefix(*res.Source, "data:") {
				src = *res.Source
			}
			add(Write{Path: f.Path, Kind: kind, Data: r.data, Source: src, Unknown: !r.done, at: at})
		}
		piece("file", fc.contents, f.Contents, sub(at, "contents"))
		for j, a := range fc.appends {
			if j < len(f.Append) {
				piece("append", a, f.Append[j], sub(at, "append", j))
			}
		}
	}
	for i, l := range st.Links {
		kind := "link"
		if util.IsTrue(l.Hard) {
			kind = "hardlink"
		}
		target := ""
		if l.Target != nil {
			target = *l.Target
		}
		add(Write{Path: l.Path, Kind: kind, Data: []byte(target), at: []any{"storage", "links", i}})
	}
	for i, u := range cfg.Ignition.Systemd.Units {
		at := []any{"systemd", "units", i}
		if !plainName(u.Name) {
			continue
		}
		if !util.NilOrEmpty(u.Contents) {
			add(Write{Path: unitPath(u.Name), Kind: "unit", Data: []byte(*u.Contents), at: sub(at, "contents")})
		}
		for j, d := range u.Dropins {
			if plainName(d.Name) && !util.NilOrEmpty(d.Contents) {
				add(Write{Path: dropinPath(u.Name, d.Name), Kind: "dropin", Data: []byte(*d.Contents), at: sub(at, "dropins", j, "contents")})
			}
		}
	}
	return w
}

// Validate lists every problem of a config, in document order; none means
// drover-agent accepts it. It runs the agent's own code (Parse, Resolve when
// opts has a Fetcher, the Extra checks), so the verdict and the words are
// the same on a build host as on the node.
func Validate(data []byte, opts Options) []Problem {
	_, ps := check(context.Background(), data, opts)
	return ps
}

// Prepare is the agent's path from user-data to a plan: parse, enforce the
// policy, fetch and verify every remote content, run the Extra checks,
// plan. The error is Problems when the config is refused. Nothing is
// written; pass the plan to Apply.
func Prepare(ctx context.Context, data []byte, opts Options) (*NodePlan, error) {
	cfg, ps := check(ctx, data, opts)
	if len(ps) > 0 {
		return nil, Problems(ps)
	}
	return Plan(cfg)
}

func check(ctx context.Context, data []byte, opts Options) (*Config, []Problem) {
	cfg, ps := parse(data)
	if cfg == nil {
		sortProblems(ps)
		return nil, ps
	}
	c := &collector{tree: cfg.tree, list: ps}
	if opts.Fetcher != nil {
		resolve(ctx, cfg, opts.Fetcher, opts.Contents, c)
	}
	if opts.Extra != nil {
		for _, p := range opts.Extra(cfg.knownFiles()) {
			p.offset = -1
			c.list = append(c.list, p)
		}
	}
	if opts.CheckWrites != nil {
		w := cfg.writes()
		at := map[string][]any{}
		for _, e := range w.Entries {
			at[e.At] = e.at
		}
		for _, p := range opts.CheckWrites(w) {
			if elems, ok := at[p.Path]; ok {
				c.add(p.Message, elems...) // located in the document
				continue
			}
			p.offset = -1
			c.list = append(c.list, p)
		}
	}
	sortProblems(c.list)
	return cfg, c.list
}
