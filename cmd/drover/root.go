package main

import (
	"fmt"
	"io"
	"net/http"
	"os"
	"regexp"
	"runtime/debug"
	"strings"
	"time"

	"github.com/spf13/cobra"
	"golang.org/x/term"

	"github.com/drover-os/drover/image/cache"
	"github.com/drover-os/drover/image/debian"
	"github.com/drover-os/drover/image/gomod"
	"github.com/drover-os/drover/image/ociimages"
	"github.com/drover-os/drover/image/sources"
)

// version is what the manifest, the SBOMs and the provenance name the
// builder by. A build may stamp it (-ldflags "-X main.version=v1.2.3", as
// `make build` does from git); otherwise init reads it from the build info.
// builderSource is what is known of the source the builder was compiled
// from: clean, dirty or unknown (never clean by default).
var (
	version       = "dev"
	builderSource gomod.SourceState
)

func init() {
	bi, _ := debug.ReadBuildInfo()
	stamped := version
	version = builderVersion(stamped, bi)
	builderSource = builderState(stamped, bi)
}

// pseudoVersion matches the tail of a Go pseudo-version
// (v0.0.0-20250102030405-abcdef123456, optionally +dirty).
var pseudoVersion = regexp.MustCompile(`[.-]\d{14}-[0-9a-f]{12}(\+dirty)?$`)

// builderVersion is drover's version: the stamped one; else a released
// module version (go install …@v1.2.3); else the VCS revision the go command
// recorded, +dirty when it saw a modified checkout; else a pseudo-version;
// "dev" only when nothing is known (go build -buildvcs=false, go run).
func builderVersion(stamped string, bi *debug.BuildInfo) string {
	if stamped != "" && stamped != "dev" {
		return stamped
	}
	if bi == nil {
		return "dev"
	}
	mod := bi.Main.Version
	if mod == "(devel)" {
		mod = ""
	}
	if mod != "" && !pseudoVersion.MatchString(mod) {
		return mod
	}
	var rev, modified string
	for _, s := range bi.Settings {
		switch s.Key {
		case "vcs.revision":
			rev = s.Value
		case "vcs.modified":
			modified = s.Value
		}
	}
	if rev != "" {
		if modified == "true" {
			rev += "+dirty"
		}
		return rev
	}
	if mod != "" {
		return mod
	}
	return "dev"
}

// builderState is what the facts say about the source drover was compiled
// from. Dirty when the version ends in +dirty or the build info recorded
// vcs.modified=true. A stamp is `make build`'s word: it stamps a commit only when both
// `git rev-parse HEAD` and `git status` ran, adding +dirty when status
// listed anything (see the Makefile). Else the build info: a module
// version the go command fetched (go install …@v1.2.3 or @commit) is the
// module's zip, checked against go.sum's database, so clean; a checkout's
// vcs.modified says clean or dirty. Anything else (go build
// -buildvcs=false, go run, no build info) is unknown.
func builderState(stamped string, bi *debug.BuildInfo) gomod.SourceState {
	v := builderVersion(stamped, bi)
	modified, revision := "", false
	if bi != nil {
		for _, s := range bi.Settings {
			switch s.Key {
			case "vcs.modified":
				modified = s.Value
			case "vcs.revision":
				revision = true
			}
		}
	}
	switch {
	case v == "" || v == "dev":
		return gomod.StateUnknown
	case strings.HasSuffix(v, "+dirty") || modified == "true":
		return gomod.StateDirty // whichever fact says so
	case stamped != "" && stamped != "dev":
		return gomod.StateClean
	case modified == "false":
		return gomod.StateClean
	case revision:
		return gomod.StateUnknown // a checkout that recorded no vcs.modified
	case bi.Main.Version != "" && bi.Main.Version != "(devel)":
		return gomod.StateClean // fetched by the go command as a module: no checkout to be dirty
	}
	return gomod.StateUnknown
}

// globals are the flags every command shares.
type globals struct {
	cacheDir string
	mirror   string
	security string
	keyring  string
	quiet    bool
	parallel int
	// registryMirrors are --registry-mirror HOST=URL entries.
	registryMirrors []string
}

func newRootCmd() *cobra.Command {
	g := &globals{}
	root := &cobra.Command{
		Use:   "drover",
		Short: "Build immutable Kubernetes node images for Alibaba Cloud ECS",
		Long: `drover builds immutable Kubernetes node images for Alibaba Cloud ECS from a
declarative recipe, and smoke-tests them under QEMU.

A typical pipeline:
  drover outdated recipes/ecs-node.yaml    # exit 1: newer packages (security updates marked) than the lock pins
  drover lock recipes/ecs-node.yaml        # resolve and pin every input (review the .lock diff)
  drover build recipes/ecs-node.yaml -o out/
  drover validate userdata.ign             # reject bad user-data before it reaches a launch template
  drover smoke out/ecs-node.raw            # the gate: boot it, join a local control plane, check the node
  drover publish --region cn-hangzhou --bucket my-images out/ecs-node.raw       # verify, import; prints the ImageId
  drover rollout --region cn-hangzhou --scaling-group asg-xxx --image m-xxx --userdata pool.yaml   # replace the nodes

Inputs come from a Debian mirror (--mirror, else $DROVER_MIRROR, else the build
host's apt sources) and, for the -security suite, Debian's security archive
(--security-mirror, else $DROVER_SECURITY_MIRROR, else apt's -security entry),
the Go module proxy (as configured for the go command) and
https URLs pinned by sha256. Downloads are cached, verified, under
$XDG_CACHE_HOME/drover (or --cache).`,
		SilenceUsage:  true,
		SilenceErrors: true,
		Version:       version,
		// Paths are resolved here, once: see paths.go.
		PersistentPreRunE: resolvePaths,
	}
	pf := root.PersistentFlags()
	pf.StringVar(&g.cacheDir, "cache", "", "download and build cache (default $XDG_CACHE_HOME/drover)")
	pf.StringVar(&g.mirror, "mirror", "", "Debian archive root URL (default $DROVER_MIRROR, else the build host's apt sources)")
	pf.StringVar(&g.security, "security-mirror", "", "Debian security archive root URL, for the recipe's -security suite (default $DROVER_SECURITY_MIRROR, else the build host's apt sources' -security entry)")
	pf.StringVar(&g.keyring, "keyring", "", "OpenPGP keyring the Debian InRelease must be signed by, for a private mirror (default: the recipe's debian.keyring, else the keys committed in recipes/keys; the lock records which)")
	pf.StringArrayVar(&g.registryMirrors, "registry-mirror", nil, "HOST=URL: fetch the recipe's cached images of registry HOST from URL (repeatable; default $DROVER_REGISTRY_MIRRORS, comma-separated; a host without one is asked itself)")
	pf.BoolVarP(&g.quiet, "quiet", "q", false, "print only errors")
	pf.IntVar(&g.parallel, "parallel", 4, "parallel downloads")
	root.AddCommand(newLockCmd(g), newFetchCmd(g), newSourcesCmd(g), newBuildCmd(g), newRunCmd(g), newValidateCmd(), newUserdataCmd(), newRelayCmd(), newDiffCmd(), newVerifyCmd(), newPublishCmd(), newSmokeCmd(g), newConformanceCmd(g), newMirrorCmd(g), newOutdatedCmd(g), newRolloutCmd(g))
	return root
}

// log is where progress goes: stderr, unless --quiet.
func (g *globals) log() io.Writer {
	if g.quiet {
		return io.Discard
	}
	return os.Stderr
}

// options builds the sources options shared by lock and fetch.
func (g *globals) options(needMirror bool) (sources.Options, error) {
	dir := g.cacheDir
	if dir == "" {
		d, err := cache.DefaultDir(os.Getenv)
		if err != nil {
			return sources.Options{}, err
		}
		dir = d
	}
	c, err := cache.Open(dir)
	if err != nil {
		return sources.Options{}, err
	}
	o := sources.Options{
		Keyring:  g.keyring,
		Cache:    c,
		HTTP:     &http.Client{Timeout: 10 * time.Minute},
		Log:      g.log(),
		Progress: !g.quiet && term.IsTerminal(int(os.Stderr.Fd())),
		Parallel: g.parallel,
		Go:       gomod.Env{Log: g.log(), WorkDir: os.TempDir()},
	}
	if o.RegistryMirrors, err = ociimages.ParseMirrors(append([]string{os.Getenv("DROVER_REGISTRY_MIRRORS")}, g.registryMirrors...)); err != nil {
		return o, err
	}
	if needMirror {
		m, err := debian.ResolveMirror(g.mirror, os.Getenv, os.DirFS("/"))
		if err != nil {
			return o, fmt.Errorf("%w (pass --mirror URL or set DROVER_MIRROR)", err)
		}
		o.Mirror = m
		// Needed only by a recipe with a -security suite: Archive reports
		// the error then.
		o.SecurityMirror, o.SecurityMirrorErr = debian.ResolveSecurityMirror(g.security, os.Getenv, os.DirFS("/"))
	}
	return o, nil
}
