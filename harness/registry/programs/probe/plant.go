package main

import (
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
)

// drover-agent's stored user-data on the node, its digest and its
// content-addressed remote contents.
const (
	storedConfig = "/var/lib/drover/config.ign"
	storedDigest = "/var/lib/drover/config.sha256"
	contentsDir  = "/var/lib/drover/contents"
)

// plantStored does what root in a privileged pod can: it edits the
// agent's stored config (through PID 1's root) to add an enabled unit
// that leaves evidence of each run in /var/<evidence>, and with
// deleteDigest removes config.sha256 beside it, so that the digest can no
// longer tell the edit apart from a changed user-data. The agent must not
// run it on the next boot without a word.
func plantStored(unit, evidence string, deleteDigest bool) (map[string]any, error) {
	p := filepath.Join(hostRoot, storedConfig)
	raw, err := os.ReadFile(p)
	if err != nil {
		return nil, err
	}
	var cfg map[string]any
	if err := json.Unmarshal(raw, &cfg); err != nil {
		return nil, fmt.Errorf("%s is not JSON: %w", storedConfig, err)
	}
	sd, _ := cfg["systemd"].(map[string]any)
	if sd == nil {
		sd = map[string]any{}
		cfg["systemd"] = sd
	}
	units, _ := sd["units"].([]any)
	sd["units"] = append(units, map[string]any{"name": unit, "enabled": true,
		"contents": plantedUnit(unit, evidence)})
	edited, err := json.Marshal(cfg)
	if err != nil {
		return nil, err
	}
	if err := os.WriteFile(p, edited, 0o600); err != nil {
		return nil, err
	}
	res := map[string]any{"planted": true, "before": sum(raw), "after": sum(edited)}
	if deleteDigest {
		if err := os.Remove(filepath.Join(hostRoot, storedDigest)); err != nil {
			return nil, err
		}
		res["digestDeleted"] = true
	}
	return res, nil
}

// plantContents deletes the agent's stored config and plants a unit in
// its remote-contents store, under the hash of its own bytes (so a cache
// that checks hashes would accept it as those bytes), the unit leaving
// evidence in /var/<evidence> if it ever runs.
func plantContents(unit, evidence string) (map[string]any, error) {
	if err := os.Remove(filepath.Join(hostRoot, storedConfig)); err != nil {
		return nil, err
	}
	text := []byte(plantedUnit(unit, evidence))
	name := "sha256-" + sum(text)
	dir := filepath.Join(hostRoot, contentsDir)
	if err := os.MkdirAll(dir, 0o700); err != nil {
		return nil, err
	}
	if err := os.WriteFile(filepath.Join(dir, name), text, 0o600); err != nil {
		return nil, err
	}
	return map[string]any{"planted": true, "storedDeleted": true, "contents": contentsDir + "/" + name}, nil
}

func plantedUnit(unit, evidence string) string {
	return "[Unit]\nDescription=" + unit + ", planted on the node by a privileged pod\n\n[Service]\nType=oneshot\nExecStart=/bin/sh -c 'mkdir -p /var/" + filepath.Dir(evidence) + " && echo planted >> /var/" + evidence + "'\n\n[Install]\nWantedBy=multi-user.target\n"
}

func sum(b []byte) string {
	s := sha256.Sum256(b)
	return hex.EncodeToString(s[:])
}

// exists says whether a path exists on the node.
func exists(path string) map[string]any {
	_, err := os.Lstat(filepath.Join(hostRoot, filepath.Clean("/"+path)))
	res := map[string]any{"path": path, "exists": err == nil}
	if err != nil && !os.IsNotExist(err) {
		res["error"] = err.Error()
	}
	return res
}

// readFile reads a node file (at most 3 KiB: the answer is a termination
// message, at most 4 KiB).
func readFile(path string) map[string]any {
	b, err := os.ReadFile(filepath.Join(hostRoot, filepath.Clean("/"+path)))
	res := map[string]any{"path": path, "exists": err == nil}
	if len(b) > 3<<10 {
		b, res["truncated"] = b[:3<<10], true
	}
	res["content"] = string(b)
	if err != nil && !os.IsNotExist(err) {
		res["error"] = err.Error()
	}
	return res
}
