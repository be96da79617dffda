package publish

import (
	"errors"
	"reflect"
	"strings"
	"testing"
)

func errorsAs(err error, target any) bool { return errors.As(err, target) }

func TestDecide(t *testing.T) {
	p, err := NewPlan(request())
	if err != nil {
		t.Fatal(err)
	}
	mine := map[string]string{TagBuildID: p.BuildID, TagRootHash: p.RootHash}
	for _, tc := range []struct {
		name  string
		found []Found
		want  Decision
		err   string
	}{
		{"none", nil, Decision{Action: ActionImport}, ""},
		{"available", []Found{{ID: "m-1", Status: "Available", Tags: mine}}, Decision{ActionReuse, "m-1", "Available"}, ""},
		{"available wins over creating", []Found{{ID: "m-1", Status: "Creating", Tags: mine}, {ID: "m-2", Status: "Available", Tags: mine}},
			Decision{ActionReuse, "m-2", "Available"}, ""},
		{"creating", []Found{{ID: "m-1", Status: "Creating", Tags: mine}}, Decision{ActionWait, "m-1", "Creating"}, ""},
		{"waiting", []Found{{ID: "m-1", Status: "Waiting", Tags: mine}}, Decision{ActionWait, "m-1", "Waiting"}, ""},
		{"in progress wins over failed", []Found{{ID: "m-1", Status: "CreateFailed", Tags: mine}, {ID: "m-2", Status: "Creating", Tags: mine}},
			Decision{ActionWait, "m-2", "Creating"}, ""},
		{"deprecated", []Found{{ID: "m-1", Status: "Deprecated", Tags: mine}}, Decision{Action: ActionImport}, ""},
		{"without a root hash tag", []Found{{ID: "m-1", Status: "Available", Tags: map[string]string{TagBuildID: p.BuildID}}},
			Decision{ActionReuse, "m-1", "Available"}, ""},
		{"failed", []Found{{ID: "m-1", Status: "CreateFailed", Tags: mine}}, Decision{},
			"image m-1 in cn-hangzhou (tagged drover:build-id=0123456789abcdef) is CreateFailed"},
		{"unavailable", []Found{{ID: "m-1", Status: "UnAvailable", Tags: mine}}, Decision{}, "DeleteImage --RegionId cn-hangzhou --ImageId m-1"},
		{"another root hash", []Found{{ID: "m-1", Status: "Available", Tags: map[string]string{TagBuildID: p.BuildID, TagRootHash: "00ff"}}}, Decision{},
			"drover:root-hash=00ff, not this image's " + rootHash},
		{"another root hash, creating", []Found{{ID: "m-1", Status: "Creating", Tags: map[string]string{TagBuildID: p.BuildID, TagRootHash: "00ff"}}}, Decision{},
			"image m-1 in cn-hangzhou is tagged drover:build-id=0123456789abcdef but drover:root-hash=00ff"},
		{"another root hash beside this one", []Found{{ID: "m-1", Status: "Available", Tags: mine},
			{ID: "m-2", Status: "Waiting", Tags: map[string]string{TagBuildID: p.BuildID, TagRootHash: "00ff"}}}, Decision{},
			"delete or retag m-2"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			d, err := Decide(p, "cn-hangzhou", tc.found)
			if tc.err != "" {
				if err == nil || !strings.Contains(err.Error(), tc.err) {
					t.Fatalf("error %v, want one containing %q", err, tc.err)
				}
				return
			}
			if err != nil || d != tc.want {
				t.Errorf("Decide = %+v, %v; want %+v", d, err, tc.want)
			}
		})
	}
}

func TestMissingTags(t *testing.T) {
	p, err := NewPlan(request())
	if err != nil {
		t.Fatal(err)
	}
	got := p.Missing(map[string]string{TagRootHash: p.RootHash, TagBuildID: p.BuildID, TagName: "other"})
	want := []Tag{{TagName, "ecs-node"}, {TagVersion, "20250301.120000"}}
	if !reflect.DeepEqual(got, want) {
		t.Errorf("Missing = %v, want %v", got, want)
	}
	all := map[string]string{}
	for _, tg := range p.Tags {
		all[tg.Key] = tg.Value
	}
	if m := p.Missing(all); len(m) != 0 {
		t.Errorf("Missing of a fully tagged image = %v, want none", m)
	}
}
