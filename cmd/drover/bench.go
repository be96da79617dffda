package main

import (
	"context"
	"fmt"
	"io"
	"os"
	"strings"
	"time"

	"github.com/drover-os/drover/harness/smoke"
	"github.com/drover-os/drover/harness/timeline"
)

// printBench is `drover smoke --bench N`: N fresh instances booted to Ready
// and rebooted to Ready, the median first-boot and reboot timelines side by
// side with a previously recorded table, and systemd-analyze's critical
// chains of the median boots.
func printBench(w io.Writer, ctx context.Context, env *smoke.Env, p smoke.Plan, n int, previous, record string) error {
	boots, err := env.Bench(ctx, p.Image, n, p.NVMe, 25*time.Minute)
	if err != nil {
		return err
	}
	var firsts, reboots []timeline.Timeline
	for i, b := range boots {
		fmt.Fprintf(w, "boot %d: first boot / reboot (guest seconds since boot):\n", i+1)
		io.WriteString(w, indent(timeline.MakeTable(b.First, b.Reboot).Format()))
		firsts, reboots = append(firsts, b.First), append(reboots, b.Reboot)
	}
	tab := timeline.MakeTable(timeline.Median(firsts), timeline.Median(reboots))
	fmt.Fprintf(w, "median of %d boots:\n", len(boots))
	if previous != "" {
		data, err := os.ReadFile(previous)
		if err != nil {
			return fmt.Errorf("reading the previous timeline: %w (record one with --bench-record)", err)
		}
		prev, err := timeline.ParseTable(string(data))
		if err != nil {
			return fmt.Errorf("%s: %w", previous, err)
		}
		fmt.Fprintf(w, "  (previous: %s)\n", previous)
		io.WriteString(w, indent(timeline.SideBySide(tab, prev)))
	} else {
		io.WriteString(w, indent(tab.Format()))
	}
	for _, reboot := range []bool{false, true} {
		i := smoke.MedianBoot(boots, reboot)
		c, name := boots[i].FirstChain, "first boot"
		if reboot {
			c, name = boots[i].RebootChain, "reboot"
		}
		fmt.Fprintf(w, "systemd-analyze on the median %s (boot %d): %s\n", name, i+1, c.Time)
		io.WriteString(w, indent(c.Chain+"\n"))
	}
	// Least privilege, in systemd's own words (the same on every boot of
	// one image; the first is shown). Worse than MEDIUM fails the bench.
	sec := boots[0].Security
	fmt.Fprintf(w, "systemd-analyze security drover-agent.service (boot 1): %s\n", sec.Overall)
	fmt.Fprintf(w, "  resident drift guard: %s\n", strings.Join(sec.Caps, "; "))
	if err := smoke.JudgeExposure(sec.Overall); err != nil {
		return err
	}
	if record != "" {
		head := fmt.Sprintf("# drover smoke --bench %d, %s, median guest seconds since kernel start\n", n, time.Now().UTC().Format("2006-01-02"))
		if err := os.WriteFile(record, []byte(head+tab.Format()), 0o644); err != nil {
			return err
		}
	}
	return nil
}

func indent(s string) string {
	return "  " + strings.ReplaceAll(strings.TrimRight(s, "\n"), "\n", "\n  ") + "\n"
}
