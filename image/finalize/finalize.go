// Package finalize does, as explicit build steps, what Debian maintainer
// scripts would have done on a running system — drover never runs them:
// accounts, unit enablement, the kernel module index and its static device
// nodes, the CA bundle, alternatives, os-release, machine-id, fstab — and
// then strips what a node never reads (docs, man pages, locales) and
// installs drover's own files.
//
// Each step is a value with a name and a reason (docs/image.md lists them);
// Steps returns them in the order they run.
package finalize

import (
	"fmt"
	"io"
	"time"

	"github.com/drover-os/drover/image/tree"
)

// Env is what a step may read besides the tree.
type Env struct {
	Name    string // image name
	Version string // image version (e.g. the lock's epoch date)
	BuildID string // short digest identifying the build inputs
	// Source is where drover's own binaries came from, e.g.
	// github.com/drover-os/drover@<commit>+dirty, or "override"; empty: not said.
	Source  string
	Epoch   time.Time
	Kernel  string // kernel version (uname -r) found in the tree
	Arch    string // Debian architecture of the image (amd64, arm64)
	Enable  []string
	Disable []string
	Mask    []string
	Log     io.Writer
}

// Step is one finalize step.
type Step interface {
	String() string // short name, e.g. "accounts"
	Why() string    // one line: why the step exists
	Run(t *tree.Tree, env *Env) error
}

// Steps lists the steps in the order they run. Files from the recipe, Go
// components and drover's own binaries are added by the builder before
// finalize, so enablement and accounts see them.
func Steps() []Step {
	return []Step{
		accounts{},
		units{},
		alternatives{},
		caBundle{},
		ldCache{},
		bootDatabases{},
		staticNodes{},
		updateStamps{},
		networkFiles{},
		osRelease{},
		machineID{},
		fstab{},
		strip{},
		emptyVar{},
	}
}

// Run runs every step, naming the step in any error.
func Run(t *tree.Tree, env *Env, steps []Step) error {
	for _, s := range steps {
		start := time.Now()
		if err := s.Run(t, env); err != nil {
			return fmt.Errorf("finalize step %s: %w", s, err)
		}
		if env.Log != nil {
			fmt.Fprintf(env.Log, "finalize: %-14s %s\n", s, time.Since(start).Round(time.Millisecond))
		}
	}
	return nil
}

func file(path string, mode uint32, data string) *tree.Node {
	return &tree.Node{Path: path, Kind: tree.Regular, Mode: mode, Data: []byte(data), Owner: "drover"}
}

func symlink(path, target string) *tree.Node {
	return &tree.Node{Path: path, Kind: tree.Symlink, Mode: 0o777, Target: target, Owner: "drover"}
}

// mask is the link that masks a system unit, as systemctl mask writes it.
func mask(unit string) *tree.Node {
	return symlink("/etc/systemd/system/"+unit, "/dev/null")
}

func dir(path string, mode uint32) *tree.Node {
	return &tree.Node{Path: path, Kind: tree.Dir, Mode: mode, Owner: "drover"}
}
