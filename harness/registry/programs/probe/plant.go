package main

import (
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
)

// storedConfig is drover-agent's stored user-data on the node.
const storedConfig = "/var/lib/drover/config.ign"

// plantStored does what root in a privileged pod can: it edits the
// agent's stored config (through PID 1's root) to add an enabled unit
// that leaves evidence of each run in /var/<evidence>. The agent must not
// run it on the next boot without a word.
func plantStored(unit, evidence string) (map[string]any, error) {
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
		"contents": "[Unit]\nDescription=planted in the stored config by a privileged pod\n\n[Service]\nType=oneshot\nExecStart=/bin/sh -c 'mkdir -p /var/" + filepath.Dir(evidence) + " && echo planted >> /var/" + evidence + "'\n\n[Install]\nWantedBy=multi-user.target\n"})
	edited, err := json.Marshal(cfg)
	if err != nil {
		return nil, err
	}
	if err := os.WriteFile(p, edited, 0o600); err != nil {
		return nil, err
	}
	return map[string]any{"planted": true, "before": sum(raw), "after": sum(edited)}, nil
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
