package ignition

import (
	"context"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// FuzzValidate: Validate never panics, says the same every time, every
// problem is addressed, and its verdict agrees with the agent's separate
// steps (Parse, Resolve, Plan) and with Prepare, and what it accepts stays
// in the writable trees and off the protected surface.
func FuzzValidate(f *testing.F) {
	names, err := filepath.Glob("../../testdata/ignition/*.ign")
	if err != nil {
		f.Fatal(err)
	}
	for _, n := range names {
		data, err := os.ReadFile(n)
		if err != nil {
			f.Fatal(err)
		}
		f.Add(data)
	}
	ctx := context.Background()
	opts := Options{Fetcher: testFetcher}
	f.Fuzz(func(t *testing.T, data []byte) {
		ps := Validate(data, opts)
		if again := Validate(data, opts); strings.Join(lines(again), "\n") != strings.Join(lines(ps), "\n") {
			t.Fatalf("Validate is not deterministic:\n%s\n---\n%s", strings.Join(lines(ps), "\n"), strings.Join(lines(again), "\n"))
		}
		for _, p := range ps {
			if !strings.HasPrefix(p.Path, "$") || p.Message == "" || p.String() != p.Path+": "+p.Message {
				t.Errorf("malformed problem %#v", p)
			}
		}
		cfg, err := Parse(data)
		if err == nil {
			err = Resolve(ctx, cfg, testFetcher)
		}
		var plan *NodePlan
		if err == nil {
			plan, err = Plan(cfg)
		}
		if (len(ps) == 0) != (err == nil) {
			t.Fatalf("Validate found %q; Parse/Resolve/Plan: %v", lines(ps), err)
		}
		plan2, err2 := Prepare(ctx, data, opts)
		if (err2 == nil) != (err == nil) {
			t.Fatalf("Prepare: %v; Parse/Resolve/Plan: %v", err2, err)
		}
		if plan != nil && plan.String() != plan2.String() {
			t.Fatalf("plans differ:\n%s\n%s", plan, plan2)
		}
		// An accepted config writes only below /etc and /var, and
		// nothing of the protected surface, also where the node's own
		// links (/var/run -> /run) would take a path.
		if plan != nil {
			s, node := surface(protectedSurface()), nodeResolver(nil)
			for _, m := range plan.Managed {
				if !underWritable(m.Path) {
					t.Fatalf("accepted config writes %s, outside /etc and /var", m.Path)
				}
				for _, p := range []string{m.Path, node.resolveParent(m.Path)} {
					if g, ok := s.covering(p); ok {
						t.Fatalf("accepted config writes %s, protected by %s", m.Path, g.pattern)
					}
				}
			}
		}
	})
}
