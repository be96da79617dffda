package main

import (
	"bytes"
	"os/exec"
	"strings"
	"testing"
)

// --surge and --max-unavailable take a count or a percentage; anything
// else is a usage error (exit 2) naming the flag, before any cloud call
// (the endpoints point nowhere).
func TestRolloutLimitFlags(t *testing.T) {
	for _, c := range []struct{ flag, value, want string }{
		{"--surge", "150%", "within 1%..100%"},
		{"--surge", "0%", "within 1%..100%"},
		{"--max-unavailable", "two", "want a number"},
		{"--max-unavailable", "-1", "want a number"},
		{"--surge", "0", "--surge must be at least 1"},
		{"--max-unhealthy", "5", "is for --repair"},
		{"--min-ready", "20m", "must be below --ready-timeout"},
	} {
		cmd := exec.Command(droverBin, "rollout", "--scaling-group", "asg-x", "--image", "m-x", "--userdata", "pool.yaml",
			"--region", "cn-test", "--ecs-endpoint", "127.0.0.1:1", "--ess-endpoint", "127.0.0.1:1", c.flag, c.value)
		var stderr bytes.Buffer
		cmd.Stderr = &stderr
		err := cmd.Run()
		code := 0
		if ee, ok := err.(*exec.ExitError); ok {
			code = ee.ExitCode()
		}
		if code != 2 || !strings.Contains(stderr.String(), c.flag) || !strings.Contains(stderr.String(), c.want) {
			t.Errorf("%s %s: exit %d, stderr %q; want 2 naming %s and %q", c.flag, c.value, code, stderr.String(), c.flag, c.want)
		}
	}
}
