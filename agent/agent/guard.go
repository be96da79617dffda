package agent

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"os"
	"sort"
	"strings"
	"time"

	"github.com/drover-os/drover/agent/ignition"
	"github.com/drover-os/drover/agent/kube"
)

// Drift is one managed path that no longer matches what the agent applied.
type Drift struct {
	Path string
	Want string // digest, link target, or "present"
	Got  string
}

func (d Drift) String() string {
	return fmt.Sprintf("%s (want %s, got %s)", d.Path, short(d.Want), short(d.Got))
}

func short(s string) string {
	if len(s) == 64 {
		return s[:12]
	}
	return s
}

// CheckDrift compares the managed paths under root with what was applied.
// Pure except for reading the files.
func CheckDrift(root string, managed []ignition.Managed) []Drift {
	var out []Drift
	for _, m := range managed {
		p := root + m.Path
		fi, err := os.Lstat(p)
		if err != nil {
			out = append(out, Drift{m.Path, "present", "missing"})
			continue
		}
		switch m.Kind {
		case "file":
			if m.SHA256 == "" {
				continue // contents depend on the node (append, keep): existence only
			}
			data, err := os.ReadFile(p)
			if err != nil {
				out = append(out, Drift{m.Path, m.SHA256, "unreadable"})
				continue
			}
			sum := sha256.Sum256(data)
			if got := hex.EncodeToString(sum[:]); got != m.SHA256 {
				out = append(out, Drift{m.Path, m.SHA256, got})
			}
		case "symlink":
			t, err := os.Readlink(p)
			if err != nil || t != m.Target {
				out = append(out, Drift{m.Path, "-> " + m.Target, "-> " + t})
			}
		case "directory":
			if !fi.IsDir() {
				out = append(out, Drift{m.Path, "directory", fi.Mode().Type().String()})
			}
		}
	}
	sort.Slice(out, func(i, j int) bool { return out[i].Path < out[j].Path })
	return out
}

// Guard re-checks the managed files every period and reports new drift on
// the console (and so the journal), in the status file and on the Node as
// a condition and an Event. It never repairs: a drifted node is replaced.
func (a *Agent) Guard(ctx context.Context, period time.Duration) {
	reported := ""
	for {
		drift := CheckDrift(a.env.Root, a.managed)
		key := fmt.Sprint(drift)
		if key != reported {
			reported = key
			a.reportDrift(ctx, drift)
		}
		select {
		case <-ctx.Done():
			return
		case <-time.After(period):
		}
	}
}

func (a *Agent) reportDrift(ctx context.Context, drift []Drift) {
	cond := kube.Condition{Type: "DroverConfigDrift", Status: "False", Reason: "NoDrift", Message: "managed files match the applied configuration"}
	if len(drift) > 0 {
		parts := make([]string, len(drift))
		for i, d := range drift {
			parts[i] = d.String()
		}
		msg := "local change to managed files: " + strings.Join(parts, "; ") + " — the node is immutable; replace the instance"
		a.rec.Note("DRIFT: " + msg)
		a.rec.SetState("joined", "drift: "+msg)
		cond = kube.Condition{Type: "DroverConfigDrift", Status: "True", Reason: "LocalChange", Message: msg}
	}
	api, node, err := a.API()
	if err != nil {
		a.rec.Note("drift report to the API server failed: " + err.Error())
		return
	}
	if err := api.SetCondition(ctx, node, cond); err != nil {
		a.rec.Note("drift report to the API server failed: " + err.Error())
	}
	if len(drift) > 0 {
		uid := ""
		if n, err := api.GetNode(ctx, node); err == nil {
			uid = n.Metadata.UID
		}
		if err := api.Event(ctx, node, uid, "ConfigDrift", cond.Message); err != nil {
			a.rec.Note("drift event failed: " + err.Error())
		}
	}
}
