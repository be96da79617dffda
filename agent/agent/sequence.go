package agent

import (
	"context"
	"time"

	"github.com/drover-os/drover/agent/nodeconfig"
)

// A step is one phase of the agent's sequence. The phases it starts
// beside the rest of the sequence when it has ended are named with it, so
// the order and the parallelism of a boot are data one can read here (as
// Talos' sequencer lists its phases), not hooks inside Run.
type step struct {
	name string
	d    time.Duration
	fn   func(context.Context) (string, error)
	// then are the background phases begun once this one has ended, in
	// this order.
	then []side
	// ready: the node's configuration is in place once this phase has
	// ended (READY=1 to systemd).
	ready bool
}

// A side is a background phase: it runs beside the sequence and its
// result arrives on *out, which the phase that needs it awaits.
type side struct {
	name string
	d    time.Duration
	fn   func(context.Context) (string, error)
	out  *chan error
}

// sequence is a boot: the phases begun at the agent's start, then the
// phases in order, each with the background phases it starts.
func (a *Agent) sequence() (first []side, steps []step) {
	first = []side{
		// Modules and sysctls need nothing from the user-data: they
		// overlap the metadata fetch.
		{"kernel", a.dl.Network, a.kernelPrep, &a.kernel},
	}
	steps = []step{
		{name: "config", d: a.dl.Config, fn: a.config},
		{name: "apply", d: a.dl.Apply, fn: a.apply, ready: true, then: []side{
			// The config's enabled units start beside the join: they may
			// be ordered after anything, the agent included.
			{"units", a.dl.Units, a.startUnits, &a.units},
			// containerd's start (seconds under emulation) overlaps the
			// network wait and the kubelet's configuration; runtime
			// awaits it.
			{"containerd", a.dl.Runtime, a.startContainerd, &a.containerd},
		}},
		{name: "network", d: a.dl.Network, fn: a.network, then: []side{
			// timesyncd starts once runtime has written its drop-in; the
			// join ends only once it has started.
			{"time", a.dl.Runtime, a.startTime, &a.timeDone},
		}},
		{name: "runtime", d: a.dl.Runtime, fn: a.runtime, then: []side{
			// containerd is active. The sandbox image's import runs
			// beside the kubelet's start and TLS bootstrap: no pod can
			// be scheduled before the Node is Ready, and the ready phase
			// awaits it.
			{"sandbox", a.dl.Runtime, a.importSandbox, &a.sandbox},
		}},
		{name: "kubelet", d: a.dl.Kubelet, fn: a.kubelet},
		{name: "certificate", d: a.dl.Certificate, fn: a.certificate},
		{name: "ready", d: a.dl.Ready, fn: a.ready},
		{name: "cleanup", d: time.Minute, fn: a.cleanup},
	}
	if fileExists(a.path(nodeconfig.ImageCacheFile)) {
		// The image cache's import starts beside the sandbox's and goes
		// on after the join: nothing awaits it (imagecache.go). An image
		// without cached images has no such phase.
		for i := range steps {
			if steps[i].name == "runtime" {
				steps[i].then = append(steps[i].then, side{"image cache", a.dl.Runtime, a.imageCache, &a.imageCacheDone})
			}
		}
	}
	return first, steps
}

// startBeside begins each background phase of sides, in order.
func (a *Agent) startBeside(ctx context.Context, sides []side) {
	for _, s := range sides {
		*s.out = a.background(ctx, s.name, s.d, s.fn)
	}
}
