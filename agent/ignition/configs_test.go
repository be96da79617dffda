package ignition

import (
	"bytes"
	"context"
	"errors"
	"flag"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/drover-os/drover/agent/nodeconfig"
)

var update = flag.Bool("update", false, "rewrite ../../testdata/ignition/*.want and testdata/plan.golden")

// testFetcher serves the http(s) sources of the fixtures.
var testFetcher = MapFetcher{
	"https://files.example.test/app.conf": []byte("listen = 8080\n"),
	"https://files.example.test/motd":     []byte("drover node\n"),
	"http://files.example.test/motd":      []byte("drover node\n"),
	"https://files.example.test/tampered": []byte("something else\n"),
}

// testExtra stands in for the node-file checks of agent/nodeconfig; a
// real node file (apiVersion drover.dev/v1alpha1) gets the real checks,
// worded as agent.NodeFileCheck words them.
func testExtra(files map[string][]byte) []Problem {
	data, ok := files["/etc/drover/node.yaml"]
	if !ok || bytes.Contains(data, []byte("cluster: prod")) {
		return nil
	}
	if bytes.HasPrefix(data, []byte("apiVersion: "+nodeconfig.APIVersion+"\n")) {
		var out []Problem
		for _, p := range nodeconfig.Validate(data, nodeconfig.Path) {
			addr, msg := p.Split()
			out = append(out, Problem{Path: addr, Message: msg})
		}
		return out
	}
	return []Problem{{Path: "/etc/drover/node.yaml:1", Message: "cluster: must not be empty"}}
}

var testOptions = Options{Fetcher: testFetcher, Extra: testExtra}

// newRoot builds a small node: an image /etc with accounts, a unit enabled
// by the image, persistent /var data, and the /var/run -> ../run link every
// Debian system has.
func newRoot(t testing.TB) string {
	t.Helper()
	root := t.TempDir()
	files := map[string]string{
		"etc/passwd":                 "root:x:0:0:root:/root:/usr/sbin/nologin\napp:x:1000:1000::/var/lib/app:/usr/sbin/nologin\n",
		"etc/group":                  "root:x:0:\napp:x:1000:\n",
		"etc/opt/hostname":           "image\n",
		"etc/hosts":                  "127.0.0.1 localhost\n",
		"etc/opt/image/default.toml": "image default\n",
		"var/lib/existing/data":      "keep me\n",
	}
	for name, data := range files {
		p := filepath.Join(root, name)
		must(t, os.MkdirAll(filepath.Dir(p), 0o755))
		must(t, os.WriteFile(p, []byte(data), 0o644))
	}
	must(t, os.MkdirAll(filepath.Join(root, "etc/systemd/system/multi-user.target.wants"), 0o755))
	must(t, os.Symlink("/usr/lib/systemd/system/old.service", filepath.Join(root, "etc/systemd/system/multi-user.target.wants/old.service")))
	must(t, os.MkdirAll(filepath.Join(root, "run"), 0o755))
	must(t, os.Symlink("../run", filepath.Join(root, "var/run")))
	must(t, os.MkdirAll(filepath.Join(root, "var/tmp"), 0o755))
	must(t, os.Chmod(filepath.Join(root, "var/tmp"), 0o1777|fs.ModeSticky))
	return root
}

func must(t testing.TB, err error) {
	t.Helper()
	if err != nil {
		t.Fatal(err)
	}
}

// snapshot records every node under root: type, mode, contents or target.
func snapshot(t testing.TB, root string) map[string]string {
	t.Helper()
	out := map[string]string{}
	err := filepath.WalkDir(root, func(p string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		fi, err := d.Info()
		if err != nil {
			return err
		}
		rel, _ := filepath.Rel(root, p)
		uid, gid := ownerOf(fi)
		desc := fmt.Sprintf("%v %d:%d", fi.Mode(), uid, gid)
		switch {
		case fi.Mode()&fs.ModeSymlink != 0:
			target, err := os.Readlink(p)
			if err != nil {
				return err
			}
			desc += " -> " + target
		case fi.Mode().IsRegular():
			data, err := os.ReadFile(p)
			if err != nil {
				return err
			}
			desc += " " + string(data)
		}
		out[rel] = desc
		return nil
	})
	must(t, err)
	return out
}

func lines(ps []Problem) []string {
	out := make([]string, len(ps))
	for i, p := range ps {
		out[i] = p.String()
	}
	return out
}

// TestConfigs runs every fixture through the agent's path (Prepare, then
// Apply on a fresh node) and through Validate.
func TestConfigs(t *testing.T) {
	names, err := filepath.Glob("../../testdata/ignition/*.ign")
	must(t, err)
	if len(names) < 30 {
		t.Fatalf("only %d fixtures", len(names))
	}
	for _, name := range names {
		base := strings.TrimSuffix(filepath.Base(name), ".ign")
		t.Run(base, func(t *testing.T) {
			data, err := os.ReadFile(name)
			must(t, err)
			root := newRoot(t)
			before := snapshot(t, root)

			var got []string
			validated := lines(Validate(data, testOptions))
			plan, err := Prepare(context.Background(), data, testOptions)
			var applied *Applied
			if err == nil {
				applied, err = Apply(plan, root)
			}
			var ps Problems
			switch {
			case err == nil:
				got = append([]string{"ok"}, managedLines(plan.Managed)...)
			case errors.As(err, &ps):
				got = lines(ps)
			default:
				t.Fatalf("error is not Problems: %v", err)
			}
			wantFile := strings.TrimSuffix(name, ".ign") + ".want"
			if *update {
				must(t, os.WriteFile(wantFile, []byte(strings.Join(got, "\n")+"\n"), 0o644))
			}
			wantData, err := os.ReadFile(wantFile)
			must(t, err)
			want := strings.Split(strings.TrimSuffix(string(wantData), "\n"), "\n")
			if strings.Join(got, "\n") != strings.Join(want, "\n") {
				t.Errorf("outcome differs\ngot:\n%s\nwant:\n%s", strings.Join(got, "\n"), strings.Join(want, "\n"))
			}

			if applied == nil {
				// Refused: whether by the config checks (which Validate must
				// repeat word for word) or by the node checks (which Validate
				// cannot see), the node is untouched.
				if plan == nil && strings.Join(validated, "\n") != strings.Join(got, "\n") {
					t.Errorf("Validate disagrees with Prepare\nValidate:\n%s\nPrepare:\n%s", strings.Join(validated, "\n"), strings.Join(got, "\n"))
				}
				if plan != nil && len(validated) != 0 {
					t.Errorf("Validate found %q, Prepare none", validated)
				}
				assertSame(t, before, snapshot(t, root))
				return
			}
			if len(validated) != 0 {
				t.Errorf("Validate found %q for an accepted config", validated)
			}
			checkApplied(t, root, plan, applied)
		})
	}
}

func managedLines(ms []Managed) []string {
	out := make([]string, len(ms))
	for i, m := range ms {
		out[i] = m.String()
	}
	return out
}

func assertSame(t *testing.T, before, after map[string]string) {
	t.Helper()
	for p, d := range before {
		if after[p] != d {
			t.Errorf("%s changed: %q -> %q", p, d, after[p])
		}
	}
	for p, d := range after {
		if _, ok := before[p]; !ok {
			t.Errorf("%s appeared: %q", p, d)
		}
	}
}

// checkApplied compares what Apply reports with the plan and the disk.
func checkApplied(t *testing.T, root string, plan *NodePlan, applied *Applied) {
	t.Helper()
	if len(applied.Managed) != len(plan.Managed) {
		t.Fatalf("applied %d managed paths, planned %d", len(applied.Managed), len(plan.Managed))
	}
	for i, m := range applied.Managed {
		pm := plan.Managed[i]
		if m.Path != pm.Path || m.Kind != pm.Kind || (pm.SHA256 != "" && m.SHA256 != pm.SHA256) {
			t.Errorf("applied %v, planned %v", m, pm)
		}
		abs := filepath.Join(root, m.Path)
		fi, err := os.Lstat(abs)
		if err != nil {
			t.Errorf("managed %s: %v", m.Path, err)
			continue
		}
		switch m.Kind {
		case "file":
			data, err := os.ReadFile(abs)
			must(t, err)
			if digest(data) != m.SHA256 || !fi.Mode().IsRegular() {
				t.Errorf("%s on disk does not match its digest", m.Path)
			}
		case "symlink":
			target, err := os.Readlink(abs)
			if err != nil || target != m.Target {
				t.Errorf("%s -> %q (%v), want %q", m.Path, target, err, m.Target)
			}
		case "directory":
			if !fi.IsDir() {
				t.Errorf("%s is not a directory", m.Path)
			}
		}
	}
	if len(applied.Warnings) > 0 {
		t.Errorf("warnings: %q", applied.Warnings)
	}
	// No temp files or backups are left behind.
	_ = filepath.WalkDir(root, func(p string, d fs.DirEntry, err error) error {
		if err == nil && strings.Contains(d.Name(), ".drover-") {
			t.Errorf("left behind: %s", p)
		}
		return nil
	})
}
