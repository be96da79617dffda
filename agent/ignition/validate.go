package ignition

import "context"

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
	sortProblems(c.list)
	return cfg, c.list
}
