package agent

import (
	"bytes"
	"fmt"
	"path"
	"strings"

	"github.com/drover-os/drover/agent/ignition"
	"github.com/drover-os/drover/agent/nodeconfig"
	"github.com/drover-os/drover/internal/gunzip"
	"github.com/drover-os/drover/internal/secretscan"
)

// The bootstrap token's secret lives in the node file and nowhere else the
// config writes. redactSecrets takes it out of the node file, the stored
// config and the stored remote contents once the kubelet has its
// certificate, by replacing the plain secret; a copy elsewhere — in
// another file (base64, percent-encoded, gzip, in a data: URL), a unit, a
// drop-in, a URL the stored config keeps, or the node file's data kept by
// a hard link (the redaction replaces the file, the link still names the
// old data) — would outlive it, and it is a credential that joins any
// node. TokenPlaceCheck refuses such configs in the Validate/Prepare path,
// so drover validate and the agent refuse them alike.

// maxTokenSearch bounds what the search for copies of the token inflates
// over the whole config (gzip streams inside contents: a .gz file, nested
// encodings): the contents are at most 128 MiB, but a few KB of them can
// hold hundreds of gzip streams of 64 MiB each. A config it cannot search
// in full is refused, as a copy of the token could hide in what is left.
const maxTokenSearch = 128 << 20

const (
	whyTokenPlace = "the node file's bootstrap token is redacted once the kubelet has its certificate, and a copy elsewhere would keep a credential that joins any node to the cluster"
	fixTokenPlace = "keep the token in " + NodeFile + " only (the agent renders the kubelet's bootstrap kubeconfig from it)"
)

// TokenPlaceCheck refuses a config that would store the node file's
// bootstrap token secret anywhere but the node file, or keep the node
// file's data under another name.
func TokenPlaceCheck(w ignition.Writes) []ignition.Problem {
	node, ok := w.Files[NodeFile]
	if !ok {
		return nil // NodeFileCheck says what is wrong
	}
	// ParseJoined: a joined node's stored config carries the redacted
	// token, which TokenSecret gives as "" (nothing left to place).
	cfg, err := nodeconfig.ParseJoined(node, NodeFile)
	if err != nil {
		return nil // NodeFileCheck reports the node file's problems
	}
	secret := nodeconfig.TokenSecret(cfg.Cluster.BootstrapToken)
	if secret == "" {
		return nil
	}
	return tokenPlaceProblems(w, []byte(secret))
}

func tokenPlaceProblems(w ignition.Writes, secret []byte) []ignition.Problem {
	var out []ignition.Problem
	add := func(at, format string, args ...any) {
		out = append(out, ignition.Problem{Path: at, Message: fmt.Sprintf(format, args...)})
	}
	b := gunzip.NewBudget(maxTokenSearch)
	short := "" // the entry where the search ran out of budget
	find := func(at string, data []byte) string {
		where := secretscan.FindWithin(data, secret, b)
		if b.Out() && short == "" {
			short = at
		}
		return where
	}
	node := w.Files[NodeFile]
	nodeAt := ""
	for _, e := range w.Entries {
		if e.Path == NodeFile && e.Kind == "file" {
			nodeAt = e.At
		}
	}
	if !bytes.Contains(node, secret) {
		add(nodeAt, "the node file's cluster.bootstrapToken is not written plainly (YAML escapes or a folded scalar), so the agent could not find it to redact it once the kubelet has its certificate — write it as plain <id>.<secret>")
	} else if where := find(nodeAt, bytes.ReplaceAll(node, secret, []byte(nodeconfig.RedactedSecret))); where != "" {
		add(nodeAt, "%s holds the bootstrap token's secret a second time, encoded (%s); the agent redacts only the plain token, and %s — remove the encoded copy", NodeFile, where, whyTokenPlace)
	}

	symlinks := map[string]string{}
	holders := map[string]string{NodeFile: "the node file " + NodeFile} // paths whose data holds the secret, described
	found := map[int]string{}                                           // where each file and append entry holds it, searched once
	for i, e := range w.Entries {
		switch e.Kind {
		case "link":
			symlinks[e.Path] = string(e.Data)
		case "file", "append":
			if e.Path == NodeFile {
				continue
			}
			if found[i] = find(e.At, e.Data); found[i] != "" {
				holders[e.Path] = hideSecret(e.Path, secret) + ", which holds the token too"
			}
		}
	}

	// A hard link to a hard link of the node file names the same data.
	targets := map[string]string{}
	for _, e := range w.Entries {
		if e.Kind == "hardlink" {
			targets[e.Path] = linkTarget(e.Path, string(e.Data), symlinks)
		}
	}
	for changed := true; changed; {
		changed = false
		for p, t := range targets {
			if what, ok := holders[t]; ok && holders[p] == "" {
				holders[p], changed = what, true
			}
		}
	}

	for i, e := range w.Entries {
		shown := hideSecret(e.Path, secret)
		if strings.Contains(e.Path, string(secret)) {
			add(e.At, "the path %s would hold the bootstrap token's secret in a directory entry: %s — %s", shown, whyTokenPlace, fixTokenPlace)
			continue
		}
		if e.Source != "" {
			if where := find(e.At, []byte(e.Source)); where != "" {
				add(e.At, "the URL of the contents of %s holds the bootstrap token's secret (%s); the stored config keeps the URL as given, and %s — %s", shown, where, whyTokenPlace, fixTokenPlace)
				continue
			}
		}
		switch e.Kind {
		case "file", "append":
			if e.Path == NodeFile {
				continue
			}
			if where := found[i]; where != "" {
				add(e.At, "%s would hold the bootstrap token's secret (%s): %s — %s", shown, where, whyTokenPlace, fixTokenPlace)
			}
		case "unit", "dropin":
			if where := find(e.At, e.Data); where != "" {
				add(e.At, "the %s %s holds the bootstrap token's secret (%s): %s — %s; a unit that needs to reach the API server can use the kubelet's credentials once the node has joined", unitKind(e.Kind), shown, where, whyTokenPlace, fixTokenPlace)
			}
		case "link":
			if where := find(e.At, e.Data); where != "" {
				add(e.At, "the symbolic link %s would hold the bootstrap token's secret in its target (%s): %s — %s", shown, where, whyTokenPlace, fixTokenPlace)
			}
		case "hardlink":
			target := targets[e.Path]
			what, ok := holders[target]
			if !ok {
				continue
			}
			via := ""
			if target != path.Clean(string(e.Data)) {
				via = " (through symbolic links, " + hideSecret(target, secret) + ")"
			}
			add(e.At, "the hard link %s to %s%s names the data of %s: the agent redacts the token by replacing that file, and the link would keep the old data, token included; %s — link to a file without the token, or use a symbolic link", shown, hideSecret(string(e.Data), secret), via, what, whyTokenPlace)
		}
	}
	if short != "" {
		add(short, "searching the contents for copies of the bootstrap token's secret, the gzip streams they hold expand past %d MiB in total, so the agent cannot tell whether the token is copied there, and %s — remove compressed data that is not meant for the node, or put large archives in the image", maxTokenSearch>>20, whyTokenPlace)
	}
	return out
}

func unitKind(kind string) string {
	if kind == "dropin" {
		return "drop-in"
	}
	return "unit"
}

// hideSecret keeps the secret out of messages, which end up in logs.
func hideSecret(s string, secret []byte) string {
	return strings.ReplaceAll(s, string(secret), "<secret>")
}

// linkTarget is the file a hard link at p to target names, once the
// config's symbolic links in the target's directories are followed as
// the node would follow them (a hard link is made to the last component
// itself, not followed).
func linkTarget(p, target string, symlinks map[string]string) string {
	if !path.IsAbs(target) {
		target = path.Join(path.Dir(p), target)
	}
	dir, base := path.Split(path.Clean(target))
	budget := 40 // as the kernel's limit on symbolic links in one lookup
	return path.Join(resolveDir(path.Clean(dir), symlinks, &budget), base)
}

// resolveDir follows the config's symbolic links through every component
// of the directory d.
func resolveDir(d string, symlinks map[string]string, budget *int) string {
	out := "/"
	for _, c := range strings.Split(strings.TrimPrefix(d, "/"), "/") {
		if c == "" {
			continue
		}
		next := path.Join(out, c)
		if t, ok := symlinks[next]; ok && *budget > 0 {
			*budget--
			if !path.IsAbs(t) {
				t = path.Join(out, t)
			}
			next = resolveDir(path.Clean(t), symlinks, budget)
		}
		out = next
	}
	return out
}
