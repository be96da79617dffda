package gomod

import (
	"bytes"
	"context"
	"crypto/sha1"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"hash"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
)

// The state of a checkout is judged by what the go command compiles, not by
// `git status`: status trusts the index (skip-worktree, assume-unchanged),
// the configuration (status.showUntrackedFiles, .gitignore, replace refs)
// and GIT_DIR / GIT_WORK_TREE from the environment, each of which can make a
// modified checkout look clean. Here every file a package is compiled from
// is hashed as a git blob and compared with the blob of the same path in the
// commit's tree, read from the checkout's own repository.

// commitTree is one commit of a checkout's repository.
type commitTree struct {
	top    string            // the directory holding .git
	commit string            // HEAD
	format string            // object format: sha1 or sha256
	blobs  map[string]string // slash path below top → blob id, regular files only
}

// readCommitTree finds the repository dir is in by looking for .git at or
// above it, as git itself does without GIT_DIR, and reads HEAD's tree. It
// returns nil when dir is in no repository or the repository has no commit.
func readCommitTree(ctx context.Context, dir string) (*commitTree, error) {
	top := ""
	for d := dir; ; d = filepath.Dir(d) {
		if _, err := os.Lstat(filepath.Join(d, ".git")); err == nil {
			top = d
			break
		}
		if filepath.Dir(d) == d {
			return nil, nil
		}
	}
	git := func(args ...string) ([]byte, error) {
		// An explicit --git-dir, no GIT_* variable, no system or global
		// configuration, no replace refs: the repository's own objects.
		cmd := exec.CommandContext(ctx, "git", append([]string{"--no-replace-objects", "--git-dir=" + filepath.Join(top, ".git")}, args...)...)
		cmd.Dir = top
		cmd.Env = append(dropGitVars(os.Environ()), "GIT_CONFIG_NOSYSTEM=1", "GIT_CONFIG_GLOBAL="+os.DevNull)
		var stderr bytes.Buffer
		cmd.Stderr = &stderr
		out, err := cmd.Output()
		if err != nil {
			return nil, fmt.Errorf("git %s in %s: %w: %s", strings.Join(args, " "), top, err, strings.TrimSpace(stderr.String()))
		}
		return out, nil
	}
	head, err := git("rev-parse", "--verify", "--quiet", "HEAD^{commit}")
	if err != nil {
		return nil, nil // no commit yet (or no git): nothing to compare with
	}
	t := &commitTree{top: top, commit: string(bytes.TrimSpace(head)), blobs: map[string]string{}}
	format, err := git("rev-parse", "--show-object-format")
	if err != nil {
		return nil, err
	}
	t.format = string(bytes.TrimSpace(format))
	list, err := git("ls-tree", "-r", "-z", "--full-tree", t.commit)
	if err != nil {
		return nil, err
	}
	for _, ent := range bytes.Split(bytes.TrimSuffix(list, []byte{0}), []byte{0}) {
		meta, path, ok := bytes.Cut(ent, []byte{'\t'})
		f := strings.Fields(string(meta))
		if !ok || len(f) != 3 {
			return nil, fmt.Errorf("git ls-tree in %s: unexpected entry %q", top, ent)
		}
		if f[1] == "blob" && (f[0] == "100644" || f[0] == "100755") {
			t.blobs[string(path)] = f[2]
		}
	}
	return t, nil
}

func dropGitVars(environ []string) []string {
	var out []string
	for _, kv := range environ {
		if !strings.HasPrefix(kv, "GIT_") {
			out = append(out, kv)
		}
	}
	return out
}

// blobID is the id git gives content as a blob.
func blobID(format string, data []byte) (string, error) {
	var h hash.Hash
	switch format {
	case "sha1":
		h = sha1.New()
	case "sha256":
		h = sha256.New()
	default:
		return "", fmt.Errorf("git object format %q is not supported", format)
	}
	fmt.Fprintf(h, "blob %d\x00", len(data))
	h.Write(data)
	return hex.EncodeToString(h.Sum(nil)), nil
}

// differences lists, for each compiled file (an absolute path) that is not
// byte for byte the commit's, why not; read is os.ReadFile in a build.
func (t *commitTree) differences(files []string, read func(string) ([]byte, error)) ([]string, error) {
	top, err := filepath.EvalSymlinks(t.top)
	if err != nil {
		return nil, err
	}
	var out []string
	for _, f := range files {
		real, err := filepath.EvalSymlinks(f)
		if err != nil {
			return nil, fmt.Errorf("compiled file %s: %w", f, err)
		}
		rel, err := filepath.Rel(top, real)
		if err != nil || rel == ".." || strings.HasPrefix(rel, ".."+string(filepath.Separator)) {
			out = append(out, f+": outside the checkout")
			continue
		}
		rel = filepath.ToSlash(rel)
		want, ok := t.blobs[rel]
		if !ok {
			out = append(out, rel+": not in commit "+t.commit)
			continue
		}
		data, err := read(f)
		if err != nil {
			return nil, fmt.Errorf("reading compiled file %s: %w", f, err)
		}
		got, err := blobID(t.format, data)
		if err != nil {
			return nil, err
		}
		if got != want {
			out = append(out, rel+": differs from commit "+t.commit)
		}
	}
	return out, nil
}

// listedPackage is what `go list -json` says about a package's files.
type listedPackage struct {
	Dir      string
	Standard bool
	Module   *struct {
		Main    bool
		GoMod   string
		Replace *struct{ Version string }
	}
	GoFiles, CgoFiles, CFiles, CXXFiles, MFiles, HFiles, FFiles, SFiles []string
	SwigFiles, SwigCXXFiles, SysoFiles, EmbedFiles                      []string
}

// compiledFiles lists every file of pkg and its dependencies that does not
// come from the module cache (which go.sum vouches for): the main module's
// and any directory replacement's source and embedded files, go.mod, go.sum.
func (g *goCmd) compiledFiles(ctx context.Context, dir string, vars []string, pkg string) ([]string, error) {
	out, err := g.run(ctx, dir, vars, "list", "-mod=readonly", "-deps", "-json="+
		"Dir,Standard,Module,GoFiles,CgoFiles,CFiles,CXXFiles,MFiles,HFiles,FFiles,SFiles,SwigFiles,SwigCXXFiles,SysoFiles,EmbedFiles", pkg)
	if err != nil {
		return nil, err
	}
	seen := map[string]bool{}
	var files []string
	add := func(f string) {
		if !seen[f] {
			seen[f] = true
			files = append(files, f)
		}
	}
	dec := json.NewDecoder(bytes.NewReader(out))
	for dec.More() {
		var p listedPackage
		if err := dec.Decode(&p); err != nil {
			return nil, fmt.Errorf("reading `go list` output: %w", err)
		}
		local := p.Module == nil || p.Module.Main || (p.Module.Replace != nil && p.Module.Replace.Version == "")
		if p.Standard || !local {
			continue
		}
		for _, set := range [][]string{p.GoFiles, p.CgoFiles, p.CFiles, p.CXXFiles, p.MFiles, p.HFiles, p.FFiles, p.SFiles,
			p.SwigFiles, p.SwigCXXFiles, p.SysoFiles, p.EmbedFiles} {
			for _, f := range set {
				add(filepath.Join(p.Dir, f))
			}
		}
		if p.Module != nil && p.Module.GoMod != "" {
			add(p.Module.GoMod)
			if sum := filepath.Join(filepath.Dir(p.Module.GoMod), "go.sum"); fileExists(sum) {
				add(sum)
			}
		}
	}
	slices.Sort(files)
	return files, nil
}

func fileExists(path string) bool {
	_, err := os.Stat(path)
	return err == nil
}

// sourceState describes src as compiled into pkg: its commit, and
// StateDirty with the reasons when any compiled file is not the commit's.
// With no commit to compare with (no .git, git missing or failing) the
// state is StateUnknown: the binaries' sha256 still names them, but nothing
// says which source they are.
func (g *goCmd) sourceState(ctx context.Context, src *Source, vars []string, pkg string) (*Source, []string, error) {
	tree, err := readCommitTree(ctx, src.Dir)
	if err != nil || tree == nil {
		return &Source{Dir: src.Dir, Module: src.Module, State: StateUnknown}, nil, err
	}
	files, err := g.compiledFiles(ctx, src.Dir, vars, pkg)
	if err != nil {
		return nil, nil, fmt.Errorf("listing the files %s is compiled from: %w", pkg, err)
	}
	return stateOf(src, tree, files)
}

// sourceStateOf is sourceState for files compiledFiles already listed.
func sourceStateOf(ctx context.Context, src *Source, files []string) (*Source, []string, error) {
	tree, err := readCommitTree(ctx, src.Dir)
	if err != nil || tree == nil {
		return &Source{Dir: src.Dir, Module: src.Module, State: StateUnknown}, nil, err
	}
	return stateOf(src, tree, files)
}

func stateOf(src *Source, tree *commitTree, files []string) (*Source, []string, error) {
	s := &Source{Dir: src.Dir, Module: src.Module, State: StateUnknown}
	diff, err := tree.differences(files, os.ReadFile)
	if err != nil {
		return nil, nil, err
	}
	s.Commit, s.State = tree.commit, StateClean
	if len(diff) > 0 {
		s.State = StateDirty
	}
	return s, diff, nil
}
