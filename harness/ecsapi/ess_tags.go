package ecsapi

import (
	"sort"
	"strings"
)

// ESS tags on scaling groups: TagResources, ListTagResources and
// UntagResources with ResourceType scalinggroup (developer-reference/
// api-ess-2014-08-28-tagresources, -listtagresources, -untagresources).
// Documented: at most 20 tags per scaling group, checked before any is
// bound; ListTagResources needs ResourceId.N or Tag.N and, given both,
// answers the resources matching both. Tag.N.Propagate only concerns
// instances launched later (not emulated: the flag is stored and listed).
// Not documented: the error codes (the ECS ones for the same mistakes are
// used), the key and value rules (ECS's: a key of 1–128 characters not
// starting with "aliyun" or "acs:", a value of at most 128, neither
// containing "http://" or "https://"), and the consistency of a read after
// a write (here: immediate).

// maxGroupTags is TagResources' documented limit per scaling group.
const maxGroupTags = 20

type groupTag struct {
	key, value string
	propagate  bool
}

func (c *call) tagGroups() ([]*group, *apiError) {
	if t := c.p.Get("ResourceType"); t == "" {
		return nil, errMissing("ResourceType")
	} else if !strings.EqualFold(t, "scalinggroup") {
		return nil, errInvalid("ResourceType")
	}
	var gs []*group
	for _, id := range list(c.p, "ResourceId") {
		g := c.s.groups[id]
		if g == nil || g.RegionID != c.region {
			return nil, errf(404, "InvalidResourceId.NotFound", "The specified ResourceIds are not found in our records.")
		}
		gs = append(gs, g)
	}
	return gs, nil
}

func validTag(k, v string) bool {
	bad := func(s string) bool { return strings.Contains(s, "http://") || strings.Contains(s, "https://") }
	lk := strings.ToLower(k)
	return k != "" && len(k) <= 128 && len(v) <= 128 && !strings.HasPrefix(lk, "aliyun") && !strings.HasPrefix(lk, "acs:") &&
		!strings.HasPrefix(strings.ToLower(v), "acs:") && !bad(k) && !bad(v)
}

func (c *call) essTagResources() (obj, *apiError) {
	s := c.s
	s.mu.Lock()
	defer s.mu.Unlock()
	gs, e := c.tagGroups()
	if e != nil {
		return nil, e
	}
	if len(gs) == 0 {
		return nil, errMissing("ResourceId.1")
	}
	var tags []groupTag
	for _, m := range indexed(c.p, "Tag") {
		if !validTag(m["Key"], m["Value"]) {
			return nil, errf(400, "InvalidParameter", "The specified tag %q=%q is not valid.", m["Key"], m["Value"])
		}
		t := groupTag{key: m["Key"], value: m["Value"], propagate: strings.EqualFold(m["Propagate"], "true")}
		tags = setGroupTag(tags, t)
	}
	if len(tags) == 0 {
		return nil, errMissing("Tag.1.Key")
	}
	for _, g := range gs {
		after := g.tags
		for _, t := range tags {
			after = setGroupTag(append([]groupTag(nil), after...), t)
		}
		if len(after) > maxGroupTags {
			return nil, errf(400, "QuotaExceed.TagsPerResource", "A scaling group holds at most %d tags.", maxGroupTags)
		}
	}
	for _, g := range gs {
		for _, t := range tags {
			g.tags = setGroupTag(g.tags, t)
		}
	}
	return obj{}, nil
}

func setGroupTag(tags []groupTag, t groupTag) []groupTag {
	for i := range tags {
		if tags[i].key == t.key {
			tags[i] = t
			return tags
		}
	}
	return append(tags, t)
}

func (c *call) essListTagResources() (obj, *apiError) {
	s := c.s
	s.mu.Lock()
	defer s.mu.Unlock()
	gs, e := c.tagGroups()
	if e != nil {
		return nil, e
	}
	var want []tag
	for _, m := range indexed(c.p, "Tag") {
		want = append(want, tag{m["Key"], m["Value"]})
	}
	if len(gs) == 0 && len(want) == 0 {
		return nil, errMissing("ResourceId.1")
	}
	if len(gs) == 0 {
		for _, id := range s.groupIDs {
			if g := s.groups[id]; g.RegionID == c.region {
				gs = append(gs, g)
			}
		}
	}
	out := []obj{}
	for _, g := range gs {
		var have []tag
		for _, t := range g.tags {
			have = append(have, tag{t.key, t.value})
		}
		if !hasTags(have, want) {
			continue
		}
		sorted := append([]groupTag(nil), g.tags...)
		sort.SliceStable(sorted, func(i, j int) bool { return sorted[i].key < sorted[j].key })
		for _, t := range sorted {
			out = append(out, obj{"ResourceId": g.ID, "ResourceType": "scalinggroup", "TagKey": t.key, "TagValue": t.value, "Propagate": t.propagate})
		}
	}
	return obj{"NextToken": "", "TagResources": obj{"TagResource": out}}, nil
}

// essUntagResources removes TagKey.N, or every tag with All=true; with
// neither it removes nothing (ECS's UntagResources documents All as
// applying only when no TagKey.N is given).
func (c *call) essUntagResources() (obj, *apiError) {
	all, e := c.boolParam("All", false)
	if e != nil {
		return nil, e
	}
	keys := list(c.p, "TagKey")
	s := c.s
	s.mu.Lock()
	defer s.mu.Unlock()
	gs, e := c.tagGroups()
	if e != nil {
		return nil, e
	}
	if len(gs) == 0 {
		return nil, errMissing("ResourceId.1")
	}
	for _, g := range gs {
		var kept []groupTag
		for _, t := range g.tags {
			if (len(keys) == 0 && !all) || (len(keys) > 0 && !contains(keys, t.key)) {
				kept = append(kept, t)
			}
		}
		g.tags = kept
	}
	return obj{}, nil
}
