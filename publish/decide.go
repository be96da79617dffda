package publish

import (
	"fmt"
	"path/filepath"
	"slices"
)

// Found is one image a region already holds tagged with the build's ID, as
// DescribeImages tells it.
type Found struct {
	ID       string
	Status   string // Creating, Waiting, Available, UnAvailable, CreateFailed, Deprecated
	Progress string
	Tags     map[string]string
	// DataDisks counts the image's data disk mappings (DescribeImages'
	// DiskDeviceMappings of Type data).
	DataDisks int
}

// Action is what a region needs.
type Action string

const (
	ActionReuse  Action = "reuse"  // an Available image of this build
	ActionWait   Action = "wait"   // an import or copy of this build still running
	ActionImport Action = "create" // none: upload and import, or copy
)

// Decision is what Decide chose for one region.
type Decision struct {
	Action  Action
	ImageID string // the image reused or waited for
	Status  string
}

func (d Decision) String() string {
	switch d.Action {
	case ActionReuse:
		return "reuse " + d.ImageID + " (Available, tagged with this build ID)"
	case ActionWait:
		return "wait for " + d.ImageID + " (" + d.Status + ", an earlier publish of this build still running)"
	}
	return "create"
}

// inProgress are the statuses of an image ECS is still making.
var inProgress = []string{"Creating", "Waiting"}

// Decide picks, from the images tagged with the build's ID in one region,
// the one to reuse (Available), else the one to wait for (Creating or
// Waiting), else none. An image of this build ID with another root hash is
// not this image: publishing stops rather than reuse or duplicate it. A
// failed one is in the way of a new import under the same name.
func Decide(p *Plan, region string, found []Found) (Decision, error) {
	for _, f := range found {
		if h, ok := f.Tags[TagRootHash]; ok && h != p.RootHash {
			return Decision{}, fmt.Errorf("image %s in %s is tagged %s=%s but %s=%s, not this image's %s: "+
				"two builds share a build ID; delete or retag %s, then publish again", f.ID, region, TagBuildID, p.BuildID, TagRootHash, h, p.RootHash, f.ID)
		}
	}
	// An image of this build without the build's cache disk (published
	// by a drover from before data disks, or by hand) would launch nodes
	// without their cached images.
	for _, f := range found {
		if (f.Status == "Available" || slices.Contains(inProgress, f.Status)) && f.DataDisks < len(p.DataDisks) {
			return Decision{}, fmt.Errorf("image %s in %s (tagged %s=%s) has %d data disks, but this build's image has %d (its cache disk %s): "+
				"it was published without it; delete it (aliyun ecs DeleteImage --RegionId %s --ImageId %s), then publish again",
				f.ID, region, TagBuildID, p.BuildID, f.DataDisks, len(p.DataDisks), filepath.Base(p.DataDisks[0].File), region, f.ID)
		}
	}
	for _, f := range found {
		if f.Status == "Available" {
			return Decision{ActionReuse, f.ID, f.Status}, nil
		}
	}
	for _, f := range found {
		if slices.Contains(inProgress, f.Status) {
			return Decision{ActionWait, f.ID, f.Status}, nil
		}
	}
	for _, f := range found {
		if f.Status == "CreateFailed" || f.Status == "UnAvailable" {
			return Decision{}, fmt.Errorf("image %s in %s (tagged %s=%s) is %s: see why in the ECS console (Images, import tasks), "+
				"delete it (aliyun ecs DeleteImage --RegionId %s --ImageId %s), then publish again", f.ID, region, TagBuildID, p.BuildID, f.Status, region, f.ID)
		}
	}
	// Deprecated images, or none: make a new one.
	return Decision{Action: ActionImport}, nil
}

// Missing returns the plan's tags an image lacks (or carries with another
// value), for TagResources after the wait.
func (p *Plan) Missing(have map[string]string) []Tag {
	var out []Tag
	for _, t := range p.Tags {
		if have[t.Key] != t.Value {
			out = append(out, t)
		}
	}
	return out
}
