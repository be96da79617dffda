// Package erofsutils picks the erofs-utils command (fsck.erofs, dump.erofs)
// that decompresses a root's compression, for the tests that check drover's
// images with a tool drover did not write. bookworm's erofs-utils (1.5)
// decompresses LZ4 only; scripts/host-setup.sh installs trixie's (1.8, LZ4
// and zstd) beside it as <tool>-trixie.
package erofsutils

import (
	"fmt"
	"os/exec"
	"slices"
	"strings"
)

// Tool returns the command of tool ("fsck.erofs", "dump.erofs") that reads
// images whose files are compressed with alg (none, lz4, lz4hc or zstd):
// the host's when it knows alg, else the trixie one. No such tool is an
// error that says how to install one, never a reason to skip a check.
func Tool(tool, alg string) (string, error) {
	var seen []string
	for _, name := range []string{tool, tool + "-trixie"} {
		algs, err := decompressors(name)
		if err != nil {
			seen = append(seen, fmt.Sprintf("%s: %v", name, err))
			continue
		}
		if alg == "" || alg == "none" || slices.Contains(algs, alg) || alg == "lz4hc" && slices.Contains(algs, "lz4") {
			return name, nil
		}
		seen = append(seen, fmt.Sprintf("%s decompresses %s", name, strings.Join(algs, ", ")))
	}
	return "", fmt.Errorf("no %s here decompresses %s (%s): run scripts/host-setup.sh as root", tool, alg, strings.Join(seen, "; "))
}

// decompressors asks a tool's fsck.erofs sibling what it decompresses:
// 1.8 prints "available decompressors: lz4, ..., zstd" for -V; 1.5 prints
// its version only, and its mkfs.erofs --help "Available compressors are:
// lz4hc, lz4", which are what it decompresses too.
func decompressors(name string) ([]string, error) {
	suffix := strings.TrimPrefix(name, strings.SplitN(name, "-", 2)[0])
	fsck := "fsck.erofs" + suffix
	if _, err := exec.LookPath(name); err != nil {
		return nil, err
	}
	out, err := exec.Command(fsck, "-V").CombinedOutput()
	if err != nil {
		return nil, fmt.Errorf("%s -V: %v: %s", fsck, err, out)
	}
	list, ok := after(string(out), "available decompressors:")
	if !ok {
		help, _ := exec.Command("mkfs.erofs"+suffix, "--help").CombinedOutput()
		if list, ok = after(string(help), "Available compressors are:"); !ok {
			return nil, fmt.Errorf("neither %s -V nor mkfs.erofs%s --help lists its algorithms", fsck, suffix)
		}
	}
	return strings.FieldsFunc(list, func(r rune) bool { return r == ',' || r == ' ' }), nil
}

// after returns the rest of the line that follows marker in s.
func after(s, marker string) (string, bool) {
	_, rest, ok := strings.Cut(s, marker)
	line, _, _ := strings.Cut(rest, "\n")
	return line, ok
}
