package gomod

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"slices"
)

// Tree describes a directory of a build's inputs (the recipe's) as a
// provenance names it: the commit of the repository it is in and whether
// its files are that commit's, and always a digest of the files as read.
type Tree struct {
	Commit string `json:"commit,omitempty"`
	// CommitFormat is the repository's object format, sha1 or sha256.
	CommitFormat string      `json:"commitFormat,omitempty"`
	State        SourceState `json:"state"`
	// DirHash is the hex sha256 of the lines "<sha256 hex>  <path>\n", one
	// per regular file below the directory (slash path, sorted; symlinks,
	// devices and other non-regular files are skipped): Go's dirhash h1
	// without its base64, the in-toto dirHash.
	DirHash string `json:"dirHash"`
	Files   int    `json:"files"`
}

// DescribeTree hashes every regular file below dir and compares each with
// the commit of the repository dir is in (read as sourceState does, from
// the repository's own objects). With no commit (no .git, git missing or
// failing) the state is StateUnknown and DirHash is what names the files;
// a file that is not the commit's makes it StateDirty, listed in diff.
func DescribeTree(ctx context.Context, dir string) (t *Tree, diff []string, err error) {
	if dir, err = filepath.Abs(dir); err != nil {
		return nil, nil, err
	}
	var files []string
	var lines []byte
	err = filepath.WalkDir(dir, func(path string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		if d.Name() == ".git" && d.IsDir() {
			return filepath.SkipDir
		}
		if d.Type().IsRegular() {
			files = append(files, path)
		}
		return nil
	})
	if err != nil {
		return nil, nil, fmt.Errorf("reading the tree %s: %w", dir, err)
	}
	slices.Sort(files)
	data := map[string][]byte{}
	for _, f := range files {
		b, err := os.ReadFile(f)
		if err != nil {
			return nil, nil, fmt.Errorf("reading the tree %s: %w", dir, err)
		}
		data[f] = b
		rel, _ := filepath.Rel(dir, f)
		sum := sha256.Sum256(b)
		lines = fmt.Appendf(lines, "%x  %s\n", sum, filepath.ToSlash(rel))
	}
	sum := sha256.Sum256(lines)
	t = &Tree{State: StateUnknown, DirHash: hex.EncodeToString(sum[:]), Files: len(files)}
	ct, err := readCommitTree(ctx, dir)
	if err != nil || ct == nil {
		return t, nil, err
	}
	diff, err = ct.differences(files, func(p string) ([]byte, error) {
		if b, ok := data[p]; ok {
			return b, nil
		}
		return os.ReadFile(p)
	})
	if err != nil {
		return nil, nil, err
	}
	t.Commit, t.CommitFormat, t.State = ct.commit, ct.format, StateClean
	if len(diff) > 0 {
		t.State = StateDirty
	}
	return t, diff, nil
}
