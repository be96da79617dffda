package build

import (
	"context"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/drover-os/drover/image/gomod"
	"github.com/drover-os/drover/image/lock"
	"github.com/drover-os/drover/image/recipe"
	"github.com/drover-os/drover/image/sources"
	"github.com/drover-os/drover/image/tree"
)

var gomodSource = gomod.Source{Dir: ".", Module: DroverModule}

func ownBuilder(t *testing.T, toolchain string, o Options) *builder {
	m := &Manifest{}
	return &builder{p: &Plan{Recipe: &recipe.Recipe{Path: "r.yaml", Arch: "amd64"}, Lock: &lock.Lock{Toolchain: toolchain}}, o: o, man: m, tmp: t.TempDir()}
}

func TestDroverBinariesOverrideIsRecorded(t *testing.T) {
	dir := t.TempDir()
	agent, initBin := filepath.Join(dir, "agent"), filepath.Join(dir, "init")
	os.WriteFile(agent, []byte("agent bytes"), 0o755)
	os.WriteFile(initBin, []byte("init bytes"), 0o755)
	b := ownBuilder(t, "go1.26.8", Options{AgentBin: agent, InitBin: initBin})
	if err := b.droverBinaries(context.Background()); err != nil {
		t.Fatal(err)
	}
	if len(b.man.Own) != 2 || b.man.Own[0].Built != "override" || b.man.Own[0].From != agent || b.man.Own[0].SHA256 != sha([]byte("agent bytes")) {
		t.Fatalf("manifest: %+v", b.man.Own)
	}
	if b.ownSource() != "override" {
		t.Errorf("os-release source %q", b.ownSource())
	}
	// The build ID changes with drover's own binaries, which the lock does not pin.
	id := b.buildID()
	b.man.Own[0].SHA256 = sha([]byte("other agent"))
	if b.buildID() == id {
		t.Error("the build ID does not depend on drover-agent")
	}
}

func TestDroverBinariesRefusals(t *testing.T) {
	for _, tc := range []struct {
		name      string
		toolchain string
		o         Options
		want      string
	}{
		{"only --agent", "go1.26.8", Options{AgentBin: "a"}, "--agent and --init override drover's own binaries together"},
		{"no checkout", "go1.26.8", Options{}, "no checkout of github.com/drover-os/drover to build /usr/bin/drover-agent from"},
		{"lock without toolchain", "", Options{Source: &gomodSource}, "lock r.yaml.lock names no Go toolchain (it predates drover pinning one): run `drover lock r.yaml`"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			err := ownBuilder(t, tc.toolchain, tc.o).droverBinaries(context.Background())
			if err == nil || !strings.Contains(err.Error(), tc.want) {
				t.Fatalf("err = %v, want %q", err, tc.want)
			}
		})
	}
}

// TestOwnSourceIsDirtyWhenAnyBinaryIs: os-release names the checkout once,
// dirty when either binary was compiled from files that are not the commit's.
func TestOwnSourceIsDirtyWhenAnyBinaryIs(t *testing.T) {
	clean := &gomod.Source{Module: DroverModule, Commit: "c0ffee", State: gomod.StateClean}
	dirty := &gomod.Source{Module: DroverModule, Commit: "c0ffee", State: gomod.StateDirty}
	for _, tc := range []struct {
		agent, init *gomod.Source
		want        string
	}{
		{clean, clean, DroverModule + "@c0ffee"},
		{clean, dirty, DroverModule + "@c0ffee+dirty"},
		{dirty, clean, DroverModule + "@c0ffee+dirty"},
	} {
		b := ownBuilder(t, "go1.26.8", Options{})
		b.man.addOwn("/usr/bin/drover-agent", []byte("a"), OwnSource{Built: "source", Source: tc.agent})
		b.man.addOwn("/usr/lib/drover/drover-init", []byte("i"), OwnSource{Built: "source", Source: tc.init})
		if got := b.ownSource(); got != tc.want {
			t.Errorf("agent dirty=%v, init dirty=%v: os-release source %q, want %q", tc.agent.Dirty(), tc.init.Dirty(), got, tc.want)
		}
	}
}

// TestDroverInitOnlyInTheInitrd: drover-init goes into the manifest
// marked as the initrd's and not into the root; the agent goes into the
// root.
func TestDroverInitOnlyInTheInitrd(t *testing.T) {
	dir := t.TempDir()
	agent, initBin := filepath.Join(dir, "agent"), filepath.Join(dir, "init")
	os.WriteFile(agent, []byte("agent bytes"), 0o755)
	os.WriteFile(initBin, []byte("init bytes"), 0o755)
	b := ownBuilder(t, "go1.26.8", Options{AgentBin: agent, InitBin: initBin})
	if err := b.droverBinaries(context.Background()); err != nil {
		t.Fatal(err)
	}
	b.tree = tree.New()
	if err := b.addFiles(&sources.Fetched{}); err != nil {
		t.Fatal(err)
	}
	if n := b.tree.Get(InitPath); n != nil {
		t.Errorf("the root has %s", InitPath)
	}
	if n := b.tree.Get("/usr/bin/drover-agent"); n == nil || string(n.Data) != "agent bytes" {
		t.Errorf("the root's drover-agent: %+v", n)
	}
	if o := b.man.Own[1]; o.Path != InitPath || o.In != "initrd" || o.SHA256 != sha([]byte("init bytes")) {
		t.Errorf("manifest: %+v", o)
	}
	if o := b.man.Own[0]; o.In != "" {
		t.Errorf("manifest: the agent is in %q", o.In)
	}
}
