package publish

import (
	"context"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/drover-os/drover/harness/ecsapi"
)

// TestPublishCopyRefusedOnce: CopyImage refused once (Throttling.User, a
// refusal that starts nothing) is retried. Before the retry, and only
// then, drover looks in the destination for a copy an earlier attempt
// started (CopyImage takes no ClientToken); it finds none and copies: one
// copy, made by the retry, named in the result and the copy event.
func TestPublishCopyRefusedOnce(t *testing.T) {
	c := newCloud(t, 50*time.Millisecond)
	c.srv.ThrottleNext("CopyImage", 1)
	// The lookups of the build's images in the destination (DescribeImages
	// by the build tag), each before or after which CopyImage call.
	var mu sync.Mutex
	var seq []string
	defer c.srv.AfterCall(func(call ecsapi.Call) {
		mu.Lock()
		defer mu.Unlock()
		switch {
		case call.Action == "CopyImage":
			seq = append(seq, "CopyImage")
		case call.Action == "DescribeImages" && call.Params.Get("RegionId") == emuCopy && call.Params.Get("Tag.1.Key") == TagBuildID:
			seq = append(seq, "find")
		}
	})()
	p := c.plan(t, emuCopy)
	res, err := c.pb.Publish(context.Background(), p)
	if err != nil {
		t.Fatal(err)
	}
	mu.Lock()
	got := slices.Clone(seq) // before the test's own lookups
	mu.Unlock()
	copies := c.images(t, p, emuCopy)
	if len(copies) != 1 {
		t.Fatalf("%d images in %s, want one", len(copies), emuCopy)
	}
	if want := (RegionImage{emuCopy, copies[0].ImageId, ActionImport}); len(res.Images) != 2 || res.Images[1] != want {
		t.Errorf("result %+v, want %+v second", res.Images, want)
	}
	c.wantCalls(t, map[string]int{"ecs CopyImage 400 Throttling.User": 1, "ecs CopyImage 200": 1})
	// The region's lookup, then (the refused call is not a success the
	// hook sees) the retry's, then the copy.
	if want := []string{"find", "find", "CopyImage"}; !slices.Equal(got, want) {
		t.Errorf("in %s: %v, want %v", emuCopy, got, want)
	}
	if cp := c.seen("copy"); len(cp) != 1 || cp[0].ImageID != copies[0].ImageId || strings.Contains(cp[0].Message, "earlier attempt") {
		t.Errorf("copy events %+v, want one naming %s as this run's copy", cp, copies[0].ImageId)
	}
}
