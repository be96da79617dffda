package updatestamp

import (
	"strings"
	"testing"
)

// TestContentIsAnEnvFile: systemd reads the stamp as an environment file
// (parse_env_file: comment lines start with '#', one KEY=VALUE line):
// TIMESTAMP_NSEC must be its only assignment, in decimal nanoseconds.
func TestContentIsAnEnvFile(t *testing.T) {
	const nsec = 1763716544123456789
	var assignments []string
	for _, line := range strings.Split(strings.TrimSuffix(string(Content(nsec)), "\n"), "\n") {
		if strings.HasPrefix(line, "#") {
			continue
		}
		assignments = append(assignments, line)
	}
	if len(assignments) != 1 || assignments[0] != "TIMESTAMP_NSEC=1763716544123456789" {
		t.Errorf("assignments %q, want exactly TIMESTAMP_NSEC=1763716544123456789", assignments)
	}
	if !strings.HasSuffix(string(Content(0)), "TIMESTAMP_NSEC=0\n") {
		t.Errorf("the file must end in a newline after the assignment: %q", Content(0))
	}
}
