//go:build integration

package gomod

import (
	"context"
	"errors"
	"reflect"
	"strings"
	"testing"
	"time"

	"github.com/drover-os/drover/image/cache"
)

// These tests use the Go module proxy the go command is configured with.

var _ BlobStore = (*cache.Cache)(nil)

func stringer() Component {
	return Component{Name: "stringer", Module: "golang.org/x/tools", Version: "v0.30.0",
		Package: "golang.org/x/tools/cmd/stringer", Ldflags: []string{"-s -w"}}
}

func TestIntegrationStringer(t *testing.T) {
	ctx := context.Background()
	env := Env{WorkDir: t.TempDir(), Log: testLog{t}}
	l1, err := Lock(ctx, env, stringer())
	if err != nil {
		t.Fatal(err)
	}
	l2, err := Lock(ctx, env, stringer())
	if err != nil {
		t.Fatal(err)
	}
	if !reflect.DeepEqual(l1, l2) {
		t.Fatalf("two locks differ:\n%+v\n%+v", l1, l2)
	}
	t.Logf("go.mod:\n%sgo.sum:\n%s", l1.GoMod, strings.Join(l1.Sum, "\n"))
	if !strings.Contains(l1.GoMod, "\nrequire golang.org/x/tools v0.30.0 // indirect\n") {
		t.Errorf("go.mod does not require golang.org/x/tools v0.30.0")
	}

	b1, err := Build(ctx, env, l1, "linux", "amd64")
	if err != nil {
		t.Fatal(err)
	}
	defer b1.Cleanup()
	b2, err := Build(ctx, env, l2, "linux", "amd64")
	if err != nil {
		t.Fatal(err)
	}
	defer b2.Cleanup()
	t.Logf("stringer linux/amd64: %d bytes, sha256 %s, deps %v", b1.Size, b1.SHA256, b1.Deps)
	if b1.SHA256 != b2.SHA256 {
		t.Errorf("two builds differ: %s vs %s", b1.SHA256, b2.SHA256)
	}
	if b1.Module != "golang.org/x/tools" || b1.Version != "v0.30.0" {
		t.Errorf("build info names %s@%s, want golang.org/x/tools@v0.30.0", b1.Module, b1.Version)
	}

	store, err := cache.Open(t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	c1, cached, err := BuildCached(ctx, env, store, l1, "linux", "arm64")
	if err != nil || cached {
		t.Fatalf("first BuildCached: cached=%v, err=%v", cached, err)
	}
	c2, cached, err := BuildCached(ctx, env, store, l1, "linux", "arm64")
	if err != nil || !cached {
		t.Fatalf("second BuildCached: cached=%v, err=%v; want a hit", cached, err)
	}
	if c1.SHA256 != c2.SHA256 || c2.BuildInfo == nil || c2.BuildInfo.Path != "golang.org/x/tools/cmd/stringer" {
		t.Errorf("cache hit %+v does not match build %+v", c2, c1)
	}
	t.Logf("stringer linux/arm64 (cached): sha256 %s", c2.SHA256)
}

func TestIntegrationUnknownVersion(t *testing.T) {
	c := stringer()
	c.Version = "v0.30.99"
	_, err := Lock(context.Background(), Env{WorkDir: t.TempDir(), Log: testLog{t}}, c)
	if err == nil || !strings.Contains(err.Error(),
		"locking Go component stringer: golang.org/x/tools/cmd/stringer@v0.30.99 is not served by the Go module proxy; "+
			"check the version with `go list -m -versions golang.org/x/tools`") {
		t.Errorf("err = %v", err)
	}
}

// TestIntegrationKubelet locks (does not build) the kubelet: without
// replaces it must say which are missing; with StagingReplaces it must lock.
func TestIntegrationKubelet(t *testing.T) {
	ctx := context.Background()
	env := Env{WorkDir: t.TempDir(), Log: testLog{t}}
	c := Component{Name: "kubelet", Module: "k8s.io/kubernetes", Version: "v1.36.3", Package: "k8s.io/kubernetes/cmd/kubelet"}

	_, err := Lock(ctx, env, c)
	var mr *MissingReplacesError
	if !errors.As(err, &mr) {
		t.Fatalf("lock without replaces: err = %v, want a MissingReplacesError", err)
	}
	if len(mr.Suggested) < 30 || !strings.Contains(err.Error(), "  - k8s.io/api => k8s.io/api v0.36.3") {
		t.Errorf("want ~33 suggested replaces including k8s.io/api; got %d:\n%v", len(mr.Suggested), err)
	}

	// KubernetesReplaces (release: kubernetes, the control plane) derives
	// the same list from the module's go.mod.
	c.Replace, err = KubernetesReplaces(ctx, env, c.Version)
	if err != nil {
		t.Fatal(err)
	}
	if len(c.Replace) != len(mr.Suggested) {
		t.Errorf("KubernetesReplaces gives %d replaces, the missing-replaces error suggests %d", len(c.Replace), len(mr.Suggested))
	}
	start := time.Now()
	l, err := Lock(ctx, env, c)
	if err != nil {
		t.Fatal(err)
	}
	t.Logf("locked kubelet in %s: %d go.mod lines, %d go.sum lines", time.Since(start).Round(time.Millisecond),
		len(l.GoModLines()), len(l.Sum))
	t.Logf("go.mod starts:\n%s", strings.Join(l.GoModLines()[:3], "\n"))
	var api bool
	for _, s := range l.Sum {
		api = api || strings.HasPrefix(s, "k8s.io/api v0.36.3 h1:")
	}
	if !api {
		t.Errorf("go.sum has no k8s.io/api v0.36.3 h1: line")
	}
	if !strings.Contains(l.GoMod, "\nreplace k8s.io/api => k8s.io/api v0.36.3\n") {
		t.Errorf("go.mod lacks the k8s.io/api replace:\n%s", l.GoMod)
	}
}
