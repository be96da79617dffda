package gomod

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"go/version"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"sort"
	"strings"
	"time"
)

// inherited are the settings taken from the caller's go configuration
// (environment or `go env -w`): where modules come from and where they are
// cached. None of them changes the bytes of a build. Every other GO* and
// CGO_* variable is dropped, and the go config file is switched off, so a
// developer's GOFLAGS, GOAMD64 or GOEXPERIMENT cannot leak into a binary.
// GOROOT is not among them: it is where the toolchain that builds lives,
// asked of that toolchain itself (see prepare).
var inherited = []string{
	"GOPROXY", "GONOPROXY", "GOSUMDB", "GONOSUMDB", "GOPRIVATE", "GOINSECURE",
	"GOVCS", "GOAUTH", "GOPATH", "GOMODCACHE", "GOCACHE", "GOTMPDIR",
}

// pinned are the settings that change a binary's bytes, each set to the go
// command's default explicitly. Dropping the caller's variables is not
// enough: the go command takes a variable that is unset or empty from
// $GOROOT/go.env (and from the go env -w file, switched off by GOENV=off),
// so a toolchain whose go.env was edited, or a distribution's, could still
// set GOAMD64=v3 or GOFLAGS=-tags=x. Hence every value is non-empty.
// GOOS and GOARCH are set per build; the GO<arch> variables for the other
// architectures do nothing and cost nothing.
var pinned = []string{
	"GOENV=off", "GOWORK=off", "GO111MODULE=on", "GOFLAGS=-mod=mod",
	"CGO_ENABLED=0", "GO_EXTLINK_ENABLED=0", "GOFIPS140=off",
	// The baseline experiments: "," names none, and unlike an empty value
	// it overrides go.env (the build info records it as GOEXPERIMENT=,).
	"GOEXPERIMENT=,",
	"GOAMD64=v1", "GOARM64=v8.0", "GO386=sse2", "GOARM=7", "GOMIPS=hardfloat", "GOMIPS64=hardfloat",
	"GOPPC64=power8", "GORISCV64=rva20u64",
}

// unpinnable are settings whose neutral value is empty, so pinned cannot
// override a go.env that sets them: a toolchain whose go.env does is refused.
// GOCACHEPROG would let a program hand the go command compiled code.
var unpinnable = []string{"GOCACHEPROG", "GOWASM"}

// goCmd runs the go command in a fixed, explicit environment.
type goCmd struct {
	bin     string
	log     io.Writer
	base    []string // environment of every command
	version string   // GOVERSION of the toolchain, e.g. go1.26.8
}

// GoVersion returns the version of the toolchain env uses, e.g. go1.26.8.
func GoVersion(ctx context.Context, env Env) (string, error) {
	g, err := env.prepare(ctx)
	if err != nil {
		return "", err
	}
	return g.version, nil
}

// langVersion is the language version for a toolchain version: go1.26.8 →
// 1.26. A temp module declares it so that the lock depends on the minor
// release of the toolchain only, not on its patch level.
func langVersion(toolchain string) (string, error) {
	lang := version.Lang(toolchain)
	if lang == "" {
		return "", fmt.Errorf("toolchain version %q has no Go language version; use a released Go toolchain", toolchain)
	}
	return strings.TrimPrefix(lang, "go"), nil
}

func (e Env) goBin() string {
	if e.Go == "" {
		return "go"
	}
	return e.Go
}

func (e Env) workDir() string {
	if e.WorkDir == "" {
		return os.TempDir()
	}
	return e.WorkDir
}

// prepare asks the toolchain for the inherited settings and its version and
// builds the fixed environment every later command runs with.
func (e Env) prepare(ctx context.Context) (*goCmd, error) {
	caller := e.Environ
	if caller == nil {
		caller = os.Environ()
	}
	logw := e.Log
	if logw == nil {
		logw = io.Discard
	}
	toolchain := "local"
	if e.Toolchain != "" {
		if !strings.HasPrefix(e.Toolchain, "go1.") || strings.ContainsAny(e.Toolchain, "+ ") {
			return nil, fmt.Errorf("Go toolchain %q: want an exact release such as go1.26.8", e.Toolchain)
		}
		toolchain = e.Toolchain
	}
	// The caller's GOTOOLCHAIN is overridden: the lock's toolchain wins.
	// The caller's GOROOT is not passed on: the toolchain's root is where
	// its go binary is, not what the environment says.
	probe := &goCmd{bin: e.goBin(), log: io.Discard,
		base: append(dropVars(caller, "GOROOT"), "GOTOOLCHAIN="+toolchain, "GOWORK=off")}
	vals, err := probe.env(ctx, e.workDir(), inherited...)
	if err != nil {
		return nil, fmt.Errorf("asking the go command for its settings: %w; check that Go is installed (Debian package golang-go, or set the go binary)", err)
	}
	base := cleanEnviron(caller)
	for _, k := range inherited {
		if v := vals[k]; v != "" {
			base = append(base, k+"="+v)
		}
	}
	base = append(append(base, pinned...), "GOTOOLCHAIN="+toolchain)
	// Ask the toolchain that will build, in the environment it will build
	// in, what it is and where it lives.
	g := &goCmd{bin: e.goBin(), log: io.Discard, base: base}
	tc, err := g.env(ctx, e.workDir(), append([]string{"GOVERSION", "GOROOT"}, unpinnable...)...)
	if err != nil {
		return nil, fmt.Errorf("asking the go command for its toolchain: %w", err)
	}
	if !strings.HasPrefix(tc["GOVERSION"], "go") {
		return nil, fmt.Errorf("go command reported version %q; use a released Go toolchain", tc["GOVERSION"])
	}
	if e.Toolchain != "" && tc["GOVERSION"] != e.Toolchain {
		return nil, fmt.Errorf("the lock pins Go toolchain %s but the go command runs %s: refusing to build with another toolchain (check GOTOOLCHAIN handling of %s)", e.Toolchain, tc["GOVERSION"], e.goBin())
	}
	root := tc["GOROOT"]
	if root == "" {
		return nil, fmt.Errorf("the go command (%s, %s) reported no GOROOT", e.goBin(), tc["GOVERSION"])
	}
	for _, k := range unpinnable {
		if v := tc[k]; v != "" {
			return nil, fmt.Errorf("Go toolchain %s sets %s=%s (in %s): drover cannot override it and builds only with the go command's defaults; remove it from that file",
				tc["GOVERSION"], k, v, filepath.Join(root, "go.env"))
		}
	}
	g.base, g.log, g.version = append(base, "GOROOT="+root), logw, tc["GOVERSION"]
	return g, nil
}

// env runs `go env -json keys...` and returns the values.
func (g *goCmd) env(ctx context.Context, dir string, keys ...string) (map[string]string, error) {
	out, err := g.run(ctx, dir, nil, append([]string{"env", "-json"}, keys...)...)
	if err != nil {
		return nil, err
	}
	var vals map[string]string
	if err := json.Unmarshal(out, &vals); err != nil {
		return nil, fmt.Errorf("reading `go env -json` output: %w", err)
	}
	return vals, nil
}

// dropVars returns environ without the variables named.
func dropVars(environ []string, names ...string) []string {
	var out []string
	for _, kv := range environ {
		if k, _, _ := strings.Cut(kv, "="); !slices.Contains(names, k) {
			out = append(out, kv)
		}
	}
	return out
}

// cleanEnviron drops every variable the go command reads as a build setting.
func cleanEnviron(environ []string) []string {
	var out []string
	for _, kv := range environ {
		k, _, _ := strings.Cut(kv, "=")
		if strings.HasPrefix(k, "GO") || strings.HasPrefix(k, "CGO_") {
			continue
		}
		out = append(out, kv)
	}
	sort.Strings(out)
	return out
}

// cmdError is a failed go command with what it printed on stderr.
type cmdError struct {
	args   []string
	stderr string
	err    error
}

func (e *cmdError) Error() string {
	msg := fmt.Sprintf("go %s: %v", strings.Join(e.args, " "), e.err)
	if tail := stderrTail(e.stderr, 15); tail != "" {
		msg += ":\n" + tail
	}
	return msg
}

func (e *cmdError) Unwrap() error { return e.err }

// stderrTail keeps the last n lines that say something: "go: downloading"
// progress lines are noise in an error message.
func stderrTail(stderr string, n int) string {
	var keep []string
	for _, l := range strings.Split(strings.TrimSpace(stderr), "\n") {
		if l != "" && !strings.HasPrefix(l, "go: downloading ") {
			keep = append(keep, l)
		}
	}
	if len(keep) > n {
		keep = append([]string{fmt.Sprintf("[… %d lines, see the log …]", len(keep)-n)}, keep[len(keep)-n:]...)
	}
	return strings.Join(keep, "\n")
}

// run runs the go command in dir with vars added to the base environment and
// returns its stdout; stderr is streamed to the log and kept for errors.
func (g *goCmd) run(ctx context.Context, dir string, vars []string, args ...string) ([]byte, error) {
	fmt.Fprintf(g.log, "gomod: (cd %s && %s)\n", dir, shellJoin(append(append(slices.Clone(vars), "go"), args...)))
	cmd := exec.CommandContext(ctx, g.bin, args...)
	cmd.Dir = dir
	cmd.Env = append(append([]string(nil), g.base...), vars...)
	var stdout, stderr bytes.Buffer
	cmd.Stdout = &stdout
	cmd.Stderr = io.MultiWriter(&stderr, g.log)
	cmd.WaitDelay = 10 * time.Second // compile/link children must not hold the pipes open forever
	if err := cmd.Run(); err != nil {
		if ctx.Err() != nil {
			err = fmt.Errorf("%w (%w)", ctx.Err(), err)
		}
		return nil, &cmdError{args: args, stderr: stderr.String(), err: err}
	}
	return stdout.Bytes(), nil
}

// shellJoin renders a command line for the log so that it can be pasted
// into a shell: words with spaces or quotes are single-quoted.
func shellJoin(words []string) string {
	out := make([]string, len(words))
	for i, w := range words {
		if w == "" || strings.ContainsAny(w, " \t\n'\"\\$`*?[]{}();&|<>#~") {
			w = "'" + strings.ReplaceAll(w, "'", `'\''`) + "'"
		}
		out[i] = w
	}
	return strings.Join(out, " ")
}
