package rollout

import (
	"context"
	"fmt"
	"strconv"
	"strings"
)

// SurgeTag marks, on the group, a MaxSize drover raised for its surge:
// "max=<the MaxSize to restore> surge=<the MaxSize drover set>". It is
// written before MaxSize is raised and removed once MaxSize is restored,
// so a run killed in between leaves it, and the next run (a re-run or
// --resume, even with nothing left to replace) restores MaxSize. Without
// it a MaxSize above the version stamp's is someone else's doing and is
// left alone.
const SurgeTag = "drover:surge"

type surge struct{ Max, Surge int }

func (s surge) String() string { return fmt.Sprintf("max=%d surge=%d", s.Max, s.Surge) }

func parseSurge(v string) (surge, bool) {
	var s surge
	seen := 0
	for _, f := range strings.Fields(v) {
		k, val, _ := strings.Cut(f, "=")
		n, err := strconv.Atoi(val)
		if err != nil {
			return surge{}, false
		}
		switch k {
		case "max":
			s.Max, seen = n, seen+1
		case "surge":
			s.Surge, seen = n, seen+1
		}
	}
	return s, seen == 2
}

// raiseMax sets MaxSize to n for the surge, recording it first.
func (e *Env) raiseMax(ctx context.Context, groupID string, g Group, n, restore int) error {
	if err := e.Cloud.SetGroupTags(ctx, groupID, map[string]string{SurgeTag: surge{Max: restore, Surge: n}.String()}); err != nil {
		return fmt.Errorf("recording the surge on scaling group %s (tag %s): %w", groupID, SurgeTag, err)
	}
	if err := e.Cloud.SetMaxSize(ctx, groupID, n); err != nil {
		return err
	}
	e.emit(Event{Kind: EventGroup, Group: groupID, Message: fmt.Sprintf("MaxSize %d for the surge (was %d; %d is restored at the end)", n, g.MaxSize, restore)})
	return nil
}

// restoreMax puts back the MaxSize a surge raised: maxSize, the one the
// rollout started from (its version stamp's), or the surge tag's when the
// stamp has none. It never skips without saying why in an event: no surge
// recorded, MaxSize changed since, or a desired capacity still above
// maxSize (a lower MaxSize makes ESS remove instances).
func (e *Env) restoreMax(ctx context.Context, groupID string, maxSize int) error {
	g, err := e.Cloud.Group(ctx, groupID)
	if err != nil {
		return err
	}
	tags, err := e.Cloud.GroupTags(ctx, groupID)
	if err != nil {
		return err
	}
	v, marked := tags[SurgeTag]
	s, ok := parseSurge(v)
	if maxSize <= 0 {
		maxSize = s.Max
	}
	warn := func(format string, a ...any) {
		e.emit(Event{Kind: EventWarning, Group: groupID, Message: fmt.Sprintf(format, a...)})
	}
	switch {
	case !marked:
		if maxSize > 0 && g.MaxSize > maxSize {
			warn("MaxSize %d stays: above the %d this rollout started from, but drover did not raise it (no %s tag on the group)", g.MaxSize, maxSize, SurgeTag)
		}
		return nil
	case !ok || maxSize <= 0 || g.MaxSize != s.Surge:
		warn("MaxSize %d stays: drover raised it to %d for a surge (tag %s=%q), and it was changed since; lower it by hand if it should be %d", g.MaxSize, s.Surge, SurgeTag, v, maxSize)
		return e.Cloud.RemoveGroupTags(ctx, groupID, []string{SurgeTag})
	case g.DesiredCapacity > maxSize:
		warn("MaxSize %d stays for now: the group wants %d instances, more than the MaxSize %d the rollout started from, and a lower MaxSize makes ESS remove instances; the rollout restores it once the surge is over (run again with --resume)", g.MaxSize, g.DesiredCapacity, maxSize)
		return nil
	}
	if err := e.Cloud.SetMaxSize(ctx, groupID, maxSize); err != nil {
		return err
	}
	if err := e.Cloud.RemoveGroupTags(ctx, groupID, []string{SurgeTag}); err != nil {
		return err
	}
	e.emit(Event{Kind: EventGroup, Group: groupID, Message: fmt.Sprintf("MaxSize %d again (the surge had raised it to %d)", maxSize, s.Surge)})
	return nil
}

// MinTag marks, on the group, a MinSize a repair lowered while a
// replacement launches: "min=<the MinSize to restore> lowered=<the MinSize
// drover set>". Like SurgeTag it is written before the change and removed
// after the restore, so a repair killed in between leaves it, and the next
// rollout or repair (even with nothing to do) puts MinSize back.
const MinTag = "drover:min"

// lowerMin sets MinSize to n while a replacement launches, recording it
// first.
func (e *Env) lowerMin(ctx context.Context, groupID string, n, restore int) error {
	if err := e.Cloud.SetGroupTags(ctx, groupID, map[string]string{MinTag: fmt.Sprintf("min=%d lowered=%d", restore, n)}); err != nil {
		return fmt.Errorf("recording the lowered MinSize on scaling group %s (tag %s): %w", groupID, MinTag, err)
	}
	if err := e.Cloud.SetMinSize(ctx, groupID, n); err != nil {
		return err
	}
	e.emit(Event{Kind: EventGroup, Group: groupID, Message: fmt.Sprintf("MinSize %d while the replacement launches (was %d)", n, restore)})
	return nil
}

// restoreMin puts back a MinSize that MinTag says a repair lowered: when
// MinSize is still the lowered one; when it was changed since, it says so
// and leaves it. Without the tag it does nothing.
func (e *Env) restoreMin(ctx context.Context, groupID string) error {
	tags, err := e.Cloud.GroupTags(ctx, groupID)
	if err != nil {
		return err
	}
	v, marked := tags[MinTag]
	if !marked {
		return nil
	}
	var restore, lowered int
	_, perr := fmt.Sscanf(v, "min=%d lowered=%d", &restore, &lowered)
	g, err := e.Cloud.Group(ctx, groupID)
	if err != nil {
		return err
	}
	if perr != nil || g.MinSize != lowered {
		e.emit(Event{Kind: EventWarning, Group: groupID, Message: fmt.Sprintf("MinSize %d stays: a repair lowered it (tag %s=%q), and it was changed since; set it by hand if it should be %d", g.MinSize, MinTag, v, restore)})
		return e.Cloud.RemoveGroupTags(ctx, groupID, []string{MinTag})
	}
	if err := e.Cloud.SetMinSize(ctx, groupID, restore); err != nil {
		return fmt.Errorf("restoring MinSize %d of scaling group %s (tag %s): %w: set it by hand (ModifyScalingGroup)", restore, groupID, MinTag, err)
	}
	if err := e.Cloud.RemoveGroupTags(ctx, groupID, []string{MinTag}); err != nil {
		return err
	}
	e.emit(Event{Kind: EventGroup, Group: groupID, Message: fmt.Sprintf("MinSize %d again (a repair had lowered it to %d)", restore, lowered)})
	return nil
}
