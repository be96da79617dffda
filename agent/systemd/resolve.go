package systemd

import (
	"context"
	"fmt"
)

// Resolved is a unit as systemd loaded it: which file it came from, the
// drop-ins it merged, and (for a service) the commands and environment
// files it runs with and its main process. It is what `systemctl show`
// prints of those properties, read over D-Bus; the agent judges the
// node's guarantees by it rather than by the paths user-data could use.
type Resolved struct {
	Unit             string
	LoadState        string
	FragmentPath     string
	DropInPaths      []string
	ExecStart        [][]string // argv of each ExecStart= command
	EnvironmentFiles []string
	MainPID          uint32
}

// Resolve reads unit's Resolved properties.
func (c *Conn) Resolve(ctx context.Context, unit string) (Resolved, error) {
	sc, err := c.conn(ctx)
	if err != nil {
		return Resolved{}, err
	}
	r := Resolved{Unit: unit}
	props, err := sc.GetUnitPropertiesContext(ctx, unit)
	if err != nil {
		return r, fmt.Errorf("reading how systemd loaded %s: %w", unit, err)
	}
	r.LoadState, _ = props["LoadState"].(string)
	r.FragmentPath, _ = props["FragmentPath"].(string)
	r.DropInPaths, _ = props["DropInPaths"].([]string)
	if unitType(unit) != "Service" {
		return r, nil
	}
	svc, err := sc.GetUnitTypePropertiesContext(ctx, unit, "Service")
	if err != nil {
		return r, fmt.Errorf("reading %s's service properties: %w", unit, err)
	}
	r.MainPID, _ = svc["MainPID"].(uint32)
	r.ExecStart = execArgv(svc["ExecStart"])
	r.EnvironmentFiles = envFiles(svc["EnvironmentFiles"])
	return r, nil
}

// execArgv takes the argv of each command of an Exec*= property, D-Bus
// type a(sasbttttuii): path, argv, ignore-errors, then timestamps and
// status.
func execArgv(v any) [][]string {
	cmds, _ := v.([][]any)
	var out [][]string
	for _, c := range cmds {
		if len(c) < 2 {
			continue
		}
		argv, _ := c[1].([]string)
		if len(argv) == 0 {
			if p, ok := c[0].(string); ok {
				argv = []string{p}
			}
		}
		out = append(out, argv)
	}
	return out
}

// envFiles takes the paths of an EnvironmentFiles property, a(sb): path
// and whether a missing file is ignored.
func envFiles(v any) []string {
	files, _ := v.([][]any)
	var out []string
	for _, f := range files {
		if len(f) > 0 {
			if p, ok := f[0].(string); ok {
				out = append(out, p)
			}
		}
	}
	return out
}

// Stop stops a unit and waits for the job to finish.
func (c *Conn) Stop(ctx context.Context, unit string) error {
	sc, err := c.conn(ctx)
	if err != nil {
		return err
	}
	ch := make(chan string, 1)
	if _, err := sc.StopUnitContext(ctx, unit, "replace", ch); err != nil {
		return fmt.Errorf("stop %s: %w", unit, err)
	}
	select {
	case res := <-ch:
		if res != "done" {
			return fmt.Errorf("stop %s: job %s", unit, res)
		}
		return nil
	case <-ctx.Done():
		go func() { <-ch }()
		return fmt.Errorf("stop %s: %w", unit, ctx.Err())
	}
}
