package ecsapi

import (
	"encoding/base64"
	"slices"
	"sort"
	"strconv"
	"time"
)

type launchTemplate struct {
	id, name, region string
	defaultVersion   int64
	latest           int64
	versions         map[int64]*ltVersion
	created          time.Time
}

type ltVersion struct {
	number  int64
	desc    string
	created time.Time
	data    map[string]string // every LaunchTemplateData parameter, by request name (template_data.go)
	tags    []tag
}

// versionFromParams validates and captures the template data of a
// CreateLaunchTemplate(Version) request. The caller holds s.mu.
func (c *call) versionFromParams() (*ltVersion, *apiError) {
	data, e := templateData(c.p)
	if e != nil {
		return nil, e
	}
	v := &ltVersion{desc: c.p.Get("VersionDescription"), created: c.now, data: data}
	if ud := v.data["UserData"]; ud != "" {
		raw, err := base64.StdEncoding.DecodeString(ud)
		if err != nil {
			return nil, errf(400, "InvalidUserData.Base64FormatInvalid", "The specified UserData is not valid base64 format.")
		}
		if len(raw) > maxUserData {
			return nil, errf(400, "InvalidUserData.SizeExceeded", "The specified parameter UserData exceeds the size.")
		}
	}
	if id := v.data["ImageId"]; id != "" {
		im := c.s.images[id]
		if im == nil || im.region != c.region {
			return nil, errf(404, "InvalidImageId.NotFound", "The specified ImageId does not exist.")
		}
		// ImageOwnerAlias says whose image ImageId is (system, self,
		// others, marketplace); a custom image named with another
		// owner's alias is not found among that owner's images. Whether
		// a launch template checks it is not documented: refused here.
		if a := v.data["ImageOwnerAlias"]; a != "" && a != im.ownerAlias() {
			return nil, errf(404, "InvalidImageId.NotFound", "The specified ImageId %s is not an image of owner %q.", id, a)
		}
	}
	tags, e := tagParams(c.p)
	if e != nil {
		return nil, e
	}
	v.tags = tags
	return v, nil
}

func (c *call) createLaunchTemplate() (obj, *apiError) {
	name := c.p.Get("LaunchTemplateName")
	if name == "" {
		return nil, errMissing("LaunchTemplateName")
	}
	s := c.s
	s.mu.Lock()
	defer s.mu.Unlock()
	for _, lt := range s.templates {
		if lt.region == c.region && lt.name == name {
			return nil, errf(400, "InvalidLaunchTemplateName.Duplicated", "The specified LaunchTemplateName already exists.")
		}
	}
	v, e := c.versionFromParams()
	if e != nil {
		return nil, e
	}
	v.number = 1
	lt := &launchTemplate{id: newID("lt-", 20), name: name, region: c.region, defaultVersion: 1, latest: 1,
		versions: map[int64]*ltVersion{1: v}, created: c.now}
	s.templates[lt.id] = lt
	return obj{"LaunchTemplateId": lt.id, "LaunchTemplateVersionNumber": 1}, nil
}

// template finds the template a request names by LaunchTemplateId or
// LaunchTemplateName. The caller holds s.mu.
func (c *call) template() (*launchTemplate, *apiError) {
	id, name := c.p.Get("LaunchTemplateId"), c.p.Get("LaunchTemplateName")
	if id == "" && name == "" {
		return nil, errMissing("LaunchTemplateId")
	}
	for _, lt := range c.s.templates {
		if lt.region == c.region && (lt.id == id || (id == "" && lt.name == name)) {
			return lt, nil
		}
	}
	return nil, errf(400, "InvalidLaunchTemplate.NotFound", "The specified LaunchTemplateId %q LaunchTemplateName %q is not found.", id, name)
}

func (c *call) createLaunchTemplateVersion() (obj, *apiError) {
	s := c.s
	s.mu.Lock()
	defer s.mu.Unlock()
	lt, e := c.template()
	if e != nil {
		return nil, e
	}
	if len(lt.versions) >= MaxTemplateVersions {
		// The limit is documented (CreateLaunchTemplateVersion: "a maximum
		// of 30 versions"); this error code is the emulator's: no error list
		// we could read names the one ECS returns.
		return nil, errf(403, "QuotaExceed.LaunchTemplateVersion", "The launch template %s already has %d versions, the maximum.", lt.id, MaxTemplateVersions)
	}
	v, e := c.versionFromParams()
	if e != nil {
		return nil, e
	}
	lt.latest++
	v.number = lt.latest
	lt.versions[v.number] = v
	return obj{"LaunchTemplateId": lt.id, "LaunchTemplateVersionNumber": v.number}, nil
}

// MaxTemplateVersions is how many versions ECS keeps per launch template
// (CreateLaunchTemplate and CreateLaunchTemplateVersion say so).
const MaxTemplateVersions = 30

// deleteLaunchTemplateVersion deletes DeleteVersion.N of one template, all
// or none; the default version cannot be deleted.
func (c *call) deleteLaunchTemplateVersion() (obj, *apiError) {
	s := c.s
	s.mu.Lock()
	defer s.mu.Unlock()
	lt, e := c.template()
	if e != nil {
		return nil, e
	}
	del, e := c.versionList(lt, "DeleteVersion")
	if e != nil {
		return nil, e
	}
	if slices.Contains(del, lt.defaultVersion) {
		// Refused as documented; the code is the emulator's.
		return nil, errf(403, "InvalidOperation.DeleteDefaultVersion", "The default version of launch template %s cannot be deleted.", lt.id)
	}
	if len(del) == 0 {
		return nil, errMissing("DeleteVersion.1")
	}
	deleted := []obj{}
	for _, n := range del {
		delete(lt.versions, n)
		deleted = append(deleted, obj{"LaunchTemplateId": lt.id, "LaunchTemplateVersionNumber": n})
	}
	return obj{"LaunchTemplateVersions": obj{"LaunchTemplateVersion": deleted}}, nil
}

// versionList reads the repeated parameter name (name.1, name.2, …): version
// numbers of lt, each of which must exist. The caller holds s.mu.
func (c *call) versionList(lt *launchTemplate, name string) ([]int64, *apiError) {
	var ns []int64
	for _, x := range list(c.p, name) {
		n, err := strconv.ParseInt(x, 10, 64)
		if err != nil {
			return nil, errInvalid(name)
		}
		if lt.versions[n] == nil {
			return nil, errf(400, "InvalidLaunchTemplateVersion.NotFound", "The specified LaunchTemplateId %q Version %q is not found.", lt.id, x)
		}
		ns = append(ns, n)
	}
	return ns, nil
}

func (c *call) describeLaunchTemplateVersions() (obj, *apiError) {
	detail, e := c.boolParam("DetailFlag", true)
	if e != nil {
		return nil, e
	}
	onlyDefault, e := c.boolParam("DefaultVersion", false)
	if e != nil {
		return nil, e
	}
	minV, e := c.intParam("MinVersion", 0)
	if e != nil {
		return nil, e
	}
	maxV, e := c.intParam("MaxVersion", 0)
	if e != nil {
		return nil, e
	}
	s := c.s
	s.mu.Lock()
	defer s.mu.Unlock()
	lt, e := c.template()
	if e != nil {
		return nil, e
	}
	want, e := c.versionList(lt, "LaunchTemplateVersion")
	if e != nil {
		return nil, e
	}
	var match []*ltVersion
	for n, v := range lt.versions {
		if (len(want) > 0 && !containsInt(want, n)) || (onlyDefault && n != lt.defaultVersion) ||
			(minV > 0 && n < int64(minV)) || (maxV > 0 && n > int64(maxV)) {
			continue
		}
		match = append(match, v)
	}
	// Newest version first.
	sort.Slice(match, func(i, j int) bool { return match[i].number > match[j].number })
	lo, hi, number, size, e := c.page(len(match), 50)
	if e != nil {
		return nil, e
	}
	sets := []obj{}
	for _, v := range match[lo:hi] {
		set := obj{
			"LaunchTemplateId": lt.id, "LaunchTemplateName": lt.name, "VersionNumber": v.number,
			"VersionDescription": v.desc, "DefaultVersion": v.number == lt.defaultVersion,
			"CreateTime": ecsTime(v.created), "ModifiedTime": ecsTime(v.created), "CreatedBy": "emulator",
		}
		if detail {
			set["LaunchTemplateData"] = v.dataJSON()
		}
		sets = append(sets, set)
	}
	return obj{"TotalCount": len(match), "PageNumber": number, "PageSize": size,
		"LaunchTemplateVersionSets": obj{"LaunchTemplateVersionSet": sets}}, nil
}

func (c *call) modifyLaunchTemplateDefaultVersion() (obj, *apiError) {
	n, e := c.intParam("DefaultVersionNumber", 0)
	if e != nil {
		return nil, e
	}
	if c.p.Get("DefaultVersionNumber") == "" {
		return nil, errMissing("DefaultVersionNumber")
	}
	s := c.s
	s.mu.Lock()
	defer s.mu.Unlock()
	lt, e := c.template()
	if e != nil {
		return nil, e
	}
	if lt.versions[int64(n)] == nil {
		return nil, errf(400, "InvalidLaunchTemplateVersion.NotFound", "The specified LaunchTemplateId %q Version %q is not found.", lt.id, strconv.Itoa(n))
	}
	lt.defaultVersion = int64(n)
	return obj{"LaunchTemplateId": lt.id}, nil
}

// resolveVersion maps a group's LaunchTemplateVersion (a number, Default or
// Latest) to a version, as ESS does at each launch. The caller holds s.mu.
func (lt *launchTemplate) resolveVersion(ver string) *ltVersion {
	switch ver {
	case "", "Default":
		return lt.versions[lt.defaultVersion]
	case "Latest":
		return lt.versions[lt.latest]
	}
	n, err := strconv.ParseInt(ver, 10, 64)
	if err != nil {
		return nil
	}
	return lt.versions[n]
}

func containsInt(list []int64, v int64) bool {
	for _, x := range list {
		if x == v {
			return true
		}
	}
	return false
}
