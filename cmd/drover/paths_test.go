package main

import (
	"bytes"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/spf13/cobra"
	"github.com/spf13/pflag"
)

// TestEveryFlagClassified: a new string flag must be declared a path (and
// so made absolute) or not, or this test fails; a listed flag that no
// longer exists fails too.
func TestEveryFlagClassified(t *testing.T) {
	root := newRootCmd()
	seen := map[string]bool{}
	check := func(c *cobra.Command, fs *pflag.FlagSet) {
		fs.VisitAll(func(f *pflag.Flag) {
			seen[c.Name()+" --"+f.Name] = true
			if f.Value.Type() != "string" {
				return
			}
			if !slices.Contains(pathInputs[c.Name()].flags, f.Name) && !slices.Contains(notPathFlags[c.Name()], f.Name) {
				t.Errorf("drover %s --%s: declare it in paths.go as a path (pathInputs) or not (notPathFlags)", c.Name(), f.Name)
			}
		})
	}
	check(root, root.PersistentFlags())
	for _, c := range root.Commands() {
		check(c, c.LocalFlags())
	}
	for cmd, in := range pathInputs {
		for _, f := range in.flags {
			if !seen[cmd+" --"+f] {
				t.Errorf("paths.go lists drover %s --%s, which does not exist", cmd, f)
			}
		}
	}
}

// TestPathsResolved runs real commands' flag sets with relative paths from
// a working directory and checks what their RunE receives.
func TestPathsResolved(t *testing.T) {
	dir := t.TempDir()
	t.Chdir(dir)
	dir, _ = filepath.Abs(".") // as the process sees it (symlinks in TMPDIR)
	abs := func(p string) string { return filepath.Join(dir, p) }
	for _, tc := range []struct {
		args      []string
		wantArgs  []string
		wantFlags map[string]string
	}{
		{[]string{"verify", "--manifest", "release/x.manifest.json", "copy/x.raw"},
			[]string{abs("copy/x.raw")}, map[string]string{"manifest": abs("release/x.manifest.json"), "cache": ""}},
		{[]string{"--cache", "c", "build", "recipes/minimal.yaml", "--agent", "bin/drover-agent"},
			[]string{abs("recipes/minimal.yaml")},
			map[string]string{"cache": abs("c"), "agent": abs("bin/drover-agent"), "output": abs("out"), "init": ""}},
		{[]string{"smoke", "out/ecs-node.raw", "--junit", "out/smoke.xml", "--cache", "cc", "--kubernetes-version", "v1.36.3"},
			[]string{abs("out/ecs-node.raw")},
			map[string]string{"junit": abs("out/smoke.xml"), "cache": abs("cc"), "kubernetes-version": "v1.36.3", "work": ""}},
		{[]string{"run", "--until", "Reached target multi-user.target", "--state", "st", "out/minimal.raw"},
			[]string{abs("out/minimal.raw")},
			map[string]string{"until": "Reached target multi-user.target", "state": abs("st")}},
		{[]string{"userdata", "--from", "pool.yaml", "--ca-file", "-", "--server", "https://10.0.0.1:6443"},
			[]string{}, map[string]string{"from": abs("pool.yaml"), "ca-file": "-", "server": "https://10.0.0.1:6443"}},
		{[]string{"diff", "old/", "/abs/new.manifest.json"}, []string{abs("old"), "/abs/new.manifest.json"}, nil},
		{[]string{"relay", "127.0.0.1:1"}, []string{"127.0.0.1:1"}, nil},
	} {
		root := newRootCmd()
		var gotArgs []string
		gotFlags := map[string]string{}
		sub, _, err := root.Find(tc.args)
		if err != nil {
			t.Fatal(err)
		}
		sub.RunE = func(cmd *cobra.Command, args []string) error {
			gotArgs = append([]string{}, args...)
			for name := range tc.wantFlags {
				gotFlags[name] = cmd.Flags().Lookup(name).Value.String()
			}
			return nil
		}
		root.SetArgs(tc.args)
		if err := root.Execute(); err != nil {
			t.Fatalf("%v: %v", tc.args, err)
		}
		if !slices.Equal(gotArgs, tc.wantArgs) {
			t.Errorf("%v: RunE got args %q, want %q", tc.args, gotArgs, tc.wantArgs)
		}
		for name, want := range tc.wantFlags {
			if gotFlags[name] != want {
				t.Errorf("%v: --%s = %q, want %q", tc.args, name, gotFlags[name], want)
			}
		}
	}
}

// TestUserdataFromResolvesCAFile: a relative caFile in --from's YAML is
// relative to the YAML file, whatever the working directory.
func TestUserdataFromResolvesCAFile(t *testing.T) {
	ca, err := os.ReadFile(filepath.Join("..", "..", "testdata", "pki", "ca.crt"))
	if err != nil {
		t.Fatal(err)
	}
	dir := t.TempDir()
	os.MkdirAll(filepath.Join(dir, "pools"), 0o755)
	os.WriteFile(filepath.Join(dir, "pools", "ca.crt"), ca, 0o644)
	os.WriteFile(filepath.Join(dir, "pools", "pool.yaml"),
		[]byte("server: https://10.0.0.10:6443\ncaFile: ca.crt\nbootstrapToken: abcdef.0123456789abcdef\n"), 0o644)
	t.Chdir(dir)
	root := newRootCmd()
	var out bytes.Buffer
	root.SetOut(&out)
	root.SetArgs([]string{"userdata", "--from", "pools/pool.yaml"})
	if err := root.Execute(); err != nil {
		t.Fatalf("drover userdata --from pools/pool.yaml (caFile: ca.crt beside it): %v", err)
	}
	if !strings.Contains(out.String(), `"ignition"`) {
		t.Errorf("no user-data rendered:\n%s", out.String())
	}
}
