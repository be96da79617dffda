package network

import (
	"context"
	"time"
)

// Config is what the agent's network phase is given.
type Config struct {
	Root         string        // "/" on a node
	Timeout      time.Duration // bounds Wait; DefaultTimeout when zero
	PreferredMAC string        // the primary ENI's MAC from the instance metadata; may be empty
	Hostname     string        // set when not empty (ECS metadata hostname, lower-cased here)
	Modules      []string      // RequiredModules when nil; none when empty
	Logf         Logf
}

// Result is what the network phase found and set.
type Result struct {
	Primary  Primary
	Hostname string // the normalized hostname set; "" when Config.Hostname was empty
}

// Run is the agent's network phase: wait for the primary interface, set the
// hostname, load the kernel modules and set the sysctls Kubernetes needs.
// It stops at the first failing step; each error names the step and object.
func Run(ctx context.Context, c Config) (Result, error) {
	var r Result
	p, err := Wait(ctx, WaitOptions{Timeout: c.Timeout, PreferredMAC: c.PreferredMAC, Logf: c.Logf})
	if err != nil {
		return r, err
	}
	r.Primary = p
	if c.Hostname != "" {
		if r.Hostname, err = SetHostname(c.Root, c.Hostname, c.Logf); err != nil {
			return r, err
		}
	}
	names := c.Modules
	if names == nil {
		names = RequiredModules()
	}
	if len(names) > 0 {
		if err := (Modules{Root: c.Root, Logf: c.Logf}).Load(names...); err != nil {
			return r, err
		}
	}
	if err := ApplySysctls(c.Root, Sysctls(), c.Logf); err != nil {
		return r, err
	}
	return r, nil
}
