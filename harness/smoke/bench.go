package smoke

import (
	"context"
	"fmt"
	"path/filepath"
	"sort"
	"time"

	"github.com/drover-os/drover/harness/ecsmeta"
	"github.com/drover-os/drover/harness/timeline"
)

// BenchBoot is one fresh instance's first boot and its reboot: the
// timelines from the serial console and systemd's own critical chains.
type BenchBoot struct {
	First, Reboot           timeline.Timeline
	FirstChain, RebootChain *ChainResult
	// Security is systemd-analyze security drover-agent.service on the
	// first boot, with the resident guard's capabilities.
	Security *Security
}

// Bench boots n fresh instances one after the other; each is booted until
// its node is Ready, asked for systemd-analyze's critical chain, rebooted
// and asked again (for make bench). No metadata faults are injected, and
// each VM's memory is allocated before it starts (qemu.Config.PreallocMemory).
func (e *Env) Bench(ctx context.Context, image string, n int, nvme bool, timeout time.Duration) ([]BenchBoot, error) {
	e.prealloc = true
	defer func() { e.prealloc = false }()
	ud, err := e.UserData()
	if err != nil {
		return nil, err
	}
	var out []BenchBoot
	for i := 1; i <= n; i++ {
		meta := ECSInstance()
		meta.InstanceID = fmt.Sprintf("i-bp1drover0bench%d", i)
		meta.Hostname = fmt.Sprintf("izbp1drover0bench%dz", i)
		meta.UserData = ud
		in, err := e.Boot(ctx, image, filepath.Join(e.opts.WorkDir, fmt.Sprintf("vm-bench-%d", i)), nvme, meta, ecsmeta.Faults{})
		if err != nil {
			return out, err
		}
		b, err := e.benchOne(ctx, in, i, timeout)
		in.VM.Stop()
		if err != nil {
			return out, err
		}
		out = append(out, b)
	}
	return out, nil
}

func (e *Env) benchOne(ctx context.Context, in *Instance, i int, timeout time.Duration) (BenchBoot, error) {
	var b BenchBoot
	for _, boot := range []string{"first", "reboot"} {
		if boot == "reboot" {
			if err := e.Restart(ctx, in, in.Config.NVMe); err != nil { // the same controller: a timeline, not a controller change
				return b, fmt.Errorf("boot %d: reboot: %w", i, err)
			}
		}
		jctx, cancel := context.WithTimeout(ctx, timeout)
		err := e.WaitJoined(jctx, in)
		cancel()
		if err != nil {
			return b, fmt.Errorf("boot %d, %s: %w", i, boot, err)
		}
		tl := timeline.Parse(in.VM.Log())
		// Not a time: the system disk's bytes read until Ready, in MiB, as
		// a row of the same table (on ECS, boot time; issue 36).
		tl.Events = append(tl.Events, timeline.Event{Name: ReadRow, Uptime: float64(in.ReadAtReady.ReadBytes) / (1 << 20)})
		if net, ok := tl.NetReady(); ok {
			tl.Events = append(tl.Events, timeline.Event{Name: timeline.NetReadyRow, Uptime: net})
		}
		cctx, cancel := context.WithTimeout(ctx, 10*time.Minute)
		chain, err := e.CriticalChain(cctx, in, fmt.Sprintf("bench-chain-%d-%s", i, boot))
		cancel()
		if err != nil {
			return b, fmt.Errorf("boot %d, %s: critical chain: %w", i, boot, err)
		}
		if boot == "reboot" {
			b.Reboot, b.RebootChain = tl, chain
		} else {
			b.First, b.FirstChain = tl, chain
			sctx, cancel := context.WithTimeout(ctx, 10*time.Minute)
			b.Security, err = e.ProbeSecurity(sctx, in, fmt.Sprintf("bench-security-%d", i), "drover-agent.service")
			cancel()
			if err != nil {
				return b, fmt.Errorf("boot %d: systemd-analyze security: %w", i, err)
			}
		}
	}
	return b, nil
}

// ReadRow names the bench table's row of MiB read from the system disk
// until Ready.
const ReadRow = "MiB read until Ready"

// MedianBoot returns the index of the boot whose node Ready is the median
// (its critical chains are the ones to show with the median timeline).
func MedianBoot(boots []BenchBoot, reboot bool) int {
	idx := make([]int, len(boots))
	ready := func(i int) float64 {
		t := boots[i].First
		if reboot {
			t = boots[i].Reboot
		}
		v, _ := t.Get("node Ready")
		return v
	}
	for i := range idx {
		idx[i] = i
	}
	sort.SliceStable(idx, func(a, b int) bool { return ready(idx[a]) < ready(idx[b]) })
	if len(idx) == 0 {
		return -1
	}
	return idx[len(idx)/2]
}
