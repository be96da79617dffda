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
var inherited = []string{
	"GOPROXY", "GONOPROXY", "GOSUMDB", "GONOSUMDB", "GOPRIVATE", "GOINSECURE",
	"GOVCS", "GOAUTH", "GOPATH", "GOMODCACHE", "GOCACHE", "GOTMPDIR", "GOROOT",
}

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
	probe := &goCmd{bin: e.goBin(), log: io.Discard,
		base: append(append([]string(nil), caller...), "GOTOOLCHAIN="+toolchain, "GOWORK=off")}
	args := append([]string{"env", "-json", "GOVERSION"}, inherited...)
	out, err := probe.run(ctx, e.workDir(), nil, args...)
	if err != nil {
		return nil, fmt.Errorf("asking the go command for its settings: %w; check that Go is installed (Debian package golang-go, or set the go binary)", err)
	}
	var vals map[string]string
	if err := json.Unmarshal(out, &vals); err != nil {
		return nil, fmt.Errorf("reading `go env -json` output: %w", err)
	}
	if !strings.HasPrefix(vals["GOVERSION"], "go") {
		return nil, fmt.Errorf("go command reported version %q; use a released Go toolchain", vals["GOVERSION"])
	}
	if e.Toolchain != "" && vals["GOVERSION"] != e.Toolchain {
		return nil, fmt.Errorf("the lock pins Go toolchain %s but the go command runs %s: refusing to build with another toolchain (check GOTOOLCHAIN handling of %s)", e.Toolchain, vals["GOVERSION"], e.goBin())
	}
	base := cleanEnviron(caller)
	for _, k := range inherited {
		if v := vals[k]; v != "" {
			base = append(base, k+"="+v)
		}
	}
	// GOENV=off: the go config file must not add GOFLAGS and the like; the
	// settings it held are already in base, resolved above.
	base = append(base, "GOENV=off", "GOTOOLCHAIN="+toolchain, "GOWORK=off", "CGO_ENABLED=0",
		"GOFLAGS=-mod=mod", "GO111MODULE=on")
	return &goCmd{bin: e.goBin(), log: logw, base: base, version: vals["GOVERSION"]}, nil
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
