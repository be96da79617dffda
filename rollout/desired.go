package rollout

import (
	"fmt"
	"strconv"
	"strings"

	"github.com/drover-os/drover/nodecontract"
)

// Desired is what the group's instances should run.
type Desired struct {
	ImageID string
	// BuildID is the image's build ID (its nodecontract.ImageTagBuildID
	// tag); "" when the
	// image has none: new Nodes are then checked by their node-config label
	// only.
	BuildID string
	// Config is nodecontract.ConfigDigest(UserData): 64 hex digits.
	Config   string
	UserData []byte
}

// ConfigLabel is the node-config label value the agent sets
// (nodecontract.ConfigLabel of Config), "" when Config is no digest.
func (d Desired) ConfigLabel() string { return nodecontract.ConfigLabel(d.Config) }

// Stamp is what drover writes in the description of a launch template
// version it creates, one line of space-separated key=value words after
// "drover":
//
//	drover build=<build ID or -> config=<node-config label> image=<m-…> size=<n> max=<n>
//
// size is the number of instances the group held when the version was
// created (what an interrupted rollout returns the group to) and max its
// MaxSize (restored once the rollout's surge is over). Unknown keys are
// ignored, so later versions may add some.
type Stamp struct {
	BuildID, Config, ImageID string
	Size, MaxSize            int
}

func (s Stamp) String() string {
	b := s.BuildID
	if b == "" {
		b = "-"
	}
	return fmt.Sprintf("drover build=%s config=%s image=%s size=%d max=%d", b, s.Config, s.ImageID, s.Size, s.MaxSize)
}

// ParseStamp reads a version description written by drover; ok is false
// for any other description.
func ParseStamp(desc string) (s Stamp, ok bool) {
	f := strings.Fields(desc)
	if len(f) < 2 || f[0] != "drover" {
		return Stamp{}, false
	}
	seen := 0
	for _, w := range f[1:] {
		k, v, found := strings.Cut(w, "=")
		if !found {
			return Stamp{}, false
		}
		var err error
		switch k {
		case "build":
			if v != "-" {
				s.BuildID = v
			}
		case "config":
			s.Config = v
		case "image":
			s.ImageID = v
		case "size":
			s.Size, err = strconv.Atoi(v)
		case "max":
			s.MaxSize, err = strconv.Atoi(v)
		default:
			continue
		}
		if err != nil {
			return Stamp{}, false
		}
		seen++
	}
	return s, seen == 5 && s.Config != "" && s.ImageID != ""
}

func formatInt(n int64) string { return strconv.FormatInt(n, 10) }
