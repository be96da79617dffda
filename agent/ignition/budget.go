package ignition

import (
	"fmt"

	"github.com/coreos/ignition/v2/config/util"
	"github.com/coreos/ignition/v2/config/v3_5/types"

	"github.com/drover-os/drover/internal/gunzip"
)

// maxContentsTotal bounds the decoded contents of one config together:
// every file's contents and append fragment (data: URL or remote,
// decompressed) and every unit and drop-in. maxFileSize alone bounds one
// resource, and a few KB of user-data can hold hundreds of resources
// that each stay under it (gzip of zeros shrinks about 1000 times, and the
// user-data's own gzip shrinks the repeated fragments again), so without
// a total the agent and drover validate would inflate gigabytes. A node's
// real config is KBs to a few MiB; 128 MiB is twice the largest single
// resource, so one resource at its own limit still fits beside a normal
// config, and it is what the agent then holds in memory and writes to the
// tmpfs /etc, small beside the smallest instance's RAM.
const maxContentsTotal = 128 << 20

func newBudget() *gunzip.Budget { return gunzip.NewBudget(maxContentsTotal) }

// errOverBudget is how the parser words gunzip.ErrBudget: the budget is
// the config's contents. They are drawn from it as they are read: the
// inline contents in document order, then the units (both while parsing),
// then the remote contents as they are fetched; a config is refused at
// the resource where it runs out.
var errOverBudget = fmt.Errorf("the config's contents expand past %d MiB in total", maxContentsTotal>>20)

// overBudgetHint is what a user does about errOverBudget.
const overBudgetHint = "a node's config is KBs to a few MiB (this limit counts every file's contents, append fragment and unit, decompressed) — remove what is not meant to be there, or put large payloads in the image instead of the user-data"

// chargeUnits draws the units' and drop-ins' contents from the budget,
// after the inline file contents.
func chargeUnits(units []types.Unit, b *gunzip.Budget, c *collector) {
	for i, u := range units {
		at := []any{"systemd", "units", i}
		if !util.NilOrEmpty(u.Contents) && !spend(b, int64(len(*u.Contents)), sub(at, "contents"), c) {
			return
		}
		for j, d := range u.Dropins {
			if !util.NilOrEmpty(d.Contents) && !spend(b, int64(len(*d.Contents)), sub(at, "dropins", j, "contents"), c) {
				return
			}
		}
	}
}

// spend charges n bytes of the resource at at, reporting the first
// resource that goes over.
func spend(b *gunzip.Budget, n int64, at []any, c *collector) bool {
	wasOut := b.Out()
	if err := b.Take(n); err != nil {
		if !wasOut {
			overBudget(at, c)
		}
		return false
	}
	return true
}

func overBudget(at []any, c *collector) {
	c.addf(at, "%v; %s", errOverBudget, overBudgetHint)
}

// dropIfOverBudget forgets every decoded content once the budget has run
// out: the config is refused, and the checks that still run on it (Extra,
// CheckWrites) see the files' contents as unknown, as for contents not
// fetched, instead of keeping (and copying) up to the whole budget.
func (cfg *Config) dropIfOverBudget() {
	if cfg.budget == nil || !cfg.budget.Out() {
		return
	}
	for i := range cfg.files {
		fc := &cfg.files[i]
		fc.contents = resolved{}
		for j := range fc.appends {
			fc.appends[j] = resolved{}
		}
	}
}
