package smoke

import (
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"time"

	"github.com/drover-os/drover/agent/nodeconfig"
	"github.com/drover-os/drover/harness/qemu"
	"github.com/drover-os/drover/internal/secretscan"
)

// storedConfig is the agent's stored user-data relative to /var: the scan
// must have found it, or an empty dump would pass.
const storedConfig = "lib/drover/config.ign"

// ScanVar dumps a stopped instance's var partition (debugfs rdump: no
// mounts) and looks for secret in every file: plain, or inside the data:
// URLs, base64 runs and gzip streams it holds (internal/secretscan). It
// returns the files holding it, as /var/... paths, and how many files it
// read.
func ScanVar(ctx context.Context, c *qemu.Config, secret []byte) ([]secretscan.Hit, int, error) {
	dir, err := os.MkdirTemp(c.StateDir, "scan-")
	if err != nil {
		return nil, 0, err
	}
	defer os.RemoveAll(dir)
	varImg, err := varImage(ctx, c, dir)
	if err != nil {
		return nil, 0, err
	}
	// The disk's raw copy is no longer needed and may be large.
	os.Remove(filepath.Join(dir, "disk.raw"))
	tree := filepath.Join(dir, "var")
	if err := os.Mkdir(tree, 0o700); err != nil {
		return nil, 0, err
	}
	if out, err := exec.CommandContext(ctx, "debugfs", "-R", "rdump / "+tree, varImg).CombinedOutput(); err != nil {
		return nil, 0, fmt.Errorf("debugfs rdump of the var partition: %v: %s", err, out)
	}
	if fi, err := os.Stat(filepath.Join(tree, storedConfig)); err != nil || fi.Size() == 0 {
		return nil, 0, fmt.Errorf("the dump of /var has no /var/%s (%v): nothing to judge", storedConfig, err)
	}
	files := 0
	filepath.WalkDir(tree, func(_ string, d os.DirEntry, err error) error {
		if err == nil && d.Type().IsRegular() {
			files++
		}
		return nil
	})
	hits, err := secretscan.Tree(tree, secret)
	for i := range hits {
		hits[i].Path = "/var/" + hits[i].Path
	}
	return hits, files, err
}

// checkNoSecret shuts the joined node down cleanly and checks that no file
// in its /var holds the bootstrap token's secret.
func (e *Env) checkNoSecret(ctx context.Context, r *Report, in *Instance, when string) {
	s := time.Now()
	name := "no bootstrap token secret in /var after a clean shutdown (" + when + ")"
	if err := in.VM.Shutdown(3 * time.Minute); err != nil {
		r.add(name, s, err, "")
		return
	}
	secret := nodeconfig.TokenSecret(e.Cluster.BootstrapToken())
	if secret == "" {
		r.add(name, s, fmt.Errorf("the local cluster's bootstrap token is not <id>.<secret>: no secret to look for"), "")
		return
	}
	hits, files, err := ScanVar(ctx, in.Config, []byte(secret))
	if err == nil && len(hits) > 0 {
		names := make([]string, len(hits))
		for i, h := range hits {
			names[i] = h.String()
		}
		err = fmt.Errorf("the bootstrap token's secret is in %s", strings.Join(names, "; "))
	}
	r.add(name, s, err, fmt.Sprintf("%d files scanned (plain, data: URLs, base64, gzip)", files))
}
