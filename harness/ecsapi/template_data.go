package ecsapi

import (
	"encoding/json"
	"net/url"
	"strconv"
	"strings"
	"time"
)

// A launch template version keeps every LaunchTemplateData parameter its
// CreateLaunchTemplate(Version) request carried, under the request's name
// (SystemDisk.Category, DataDisk.2.DeleteWithInstance,
// NetworkInterface.1.SecurityGroupIds.2, …), and only those:
// DescribeLaunchTemplateVersions answers a parameter that was not sent as
// absent, one sent false as false. So a boolean is omitted, true or false,
// and a parameter the SDK's types do not know (a newer API's) comes back
// too, as the string it was sent as. The answer nests the repeated ones as
// the SDK's ecs.LaunchTemplateData does (DataDisks.DataDisk[],
// NetworkInterfaces.NetworkInterface[], SecurityGroupIds.SecurityGroupId[],
// Tags.InstanceTag[]).
//
// Whether ECS answers an omitted boolean as absent or as its default is
// not documented: absent is the reading under which a copy that sends
// back only what it read changes nothing.

// notTemplateData are the request parameters that are not launch data:
// the call's own, the template's (CreateLaunchTemplate's TemplateTag.N,
// TemplateResourceGroupId), the version's description and the instance
// tags (kept apart, see tagParams).
var notTemplateData = map[string]bool{
	"Action": true, "Version": true, "RegionId": true, "ClientToken": true, "AccessKeyId": true,
	"Signature": true, "SignatureMethod": true, "SignatureNonce": true, "SignatureVersion": true, "SignatureType": true,
	"Timestamp": true, "Format": true, "SecurityToken": true,
	"LaunchTemplateId": true, "LaunchTemplateName": true, "VersionDescription": true, "TemplateResourceGroupId": true,
	"OwnerId": true, "OwnerAccount": true, "ResourceOwnerId": true, "ResourceOwnerAccount": true,
}

// Typed LaunchTemplateData fields (ecs.LaunchTemplateData, ecs.DataDisk,
// ecs.NetworkInterface): anything else is answered as a string.
var (
	ltIntFields = map[string]bool{
		"SystemDisk.Size": true, "SystemDisk.Iops": true, "SystemDisk.ProvisionedIops": true, "SpotDuration": true,
		"InternetMaxBandwidthOut": true, "InternetMaxBandwidthIn": true, "Period": true, "Ipv6AddressCount": true,
		"AutoRenewPeriod": true, "HttpPutResponseHopLimit": true,
		"DataDisk.Size": true, "DataDisk.ProvisionedIops": true,
	}
	ltBoolFields = map[string]bool{
		"EnableVmOsConfig": true, "PasswordInherit": true, "SystemDisk.DeleteWithInstance": true,
		"SystemDisk.BurstingEnabled": true, "DeletionProtection": true, "AutoRenew": true,
		"DataDisk.DeleteWithInstance": true, "DataDisk.BurstingEnabled": true,
		"NetworkInterface.DeleteOnRelease": true,
	}
	ltFloatFields = map[string]bool{"SpotPriceLimit": true}
)

// templateData collects the launch data of a CreateLaunchTemplate(Version)
// request and checks what the API documents about it.
func templateData(p url.Values) (map[string]string, *apiError) {
	data := map[string]string{}
	for k, vs := range p {
		if notTemplateData[k] || strings.HasPrefix(k, "Tag.") || strings.HasPrefix(k, "TemplateTag.") || len(vs) == 0 {
			continue
		}
		v := vs[0]
		switch f := fieldKind(k); {
		case ltBoolFields[f] && v != "true" && v != "false":
			return nil, errInvalid(k)
		case ltIntFields[f]:
			if _, err := strconv.ParseInt(v, 10, 64); err != nil {
				return nil, errInvalid(k)
			}
		case ltFloatFields[f]:
			if _, err := strconv.ParseFloat(v, 64); err != nil {
				return nil, errInvalid(k)
			}
		}
		data[k] = v
	}
	// "SecurityGroupId and SecurityGroupIds.N cannot be specified at the
	// same time" (CreateLaunchTemplateVersion, and the same for a NIC's
	// NetworkInterface.N.SecurityGroupId and .SecurityGroupIds.N); the
	// error code is not documented: the one below is the emulator's.
	conflict := func(prefix string) bool {
		if data[prefix+"SecurityGroupId"] == "" {
			return false
		}
		for k := range data {
			if rest, ok := strings.CutPrefix(k, prefix+"SecurityGroupIds."); ok && !strings.Contains(rest, ".") {
				return true
			}
		}
		return false
	}
	if conflict("") {
		return nil, errf(400, "InvalidParameter.Conflict", "SecurityGroupId and SecurityGroupIds cannot be specified at the same time.")
	}
	for k := range data {
		if rest, ok := strings.CutPrefix(k, "NetworkInterface."); ok {
			n, _, _ := strings.Cut(rest, ".")
			if conflict("NetworkInterface." + n + ".") {
				return nil, errf(400, "InvalidParameter.Conflict", "NetworkInterface.%s.SecurityGroupId and NetworkInterface.%s.SecurityGroupIds cannot be specified at the same time.", n, n)
			}
		}
	}
	return data, nil
}

// fieldKind is a parameter's name without its indexes: DataDisk.2.Size →
// DataDisk.Size.
func fieldKind(k string) string {
	parts := strings.Split(k, ".")
	out := parts[:0]
	for _, p := range parts {
		if _, err := strconv.Atoi(p); err != nil {
			out = append(out, p)
		}
	}
	return strings.Join(out, ".")
}

// typed is a parameter's value as the answer's JSON carries it.
func typed(k, v string) any {
	f := fieldKind(k)
	switch {
	case ltBoolFields[f]:
		return v == "true"
	case ltIntFields[f]:
		n, _ := strconv.ParseInt(v, 10, 64)
		return n
	case ltFloatFields[f]:
		x, _ := strconv.ParseFloat(v, 64)
		return json.Number(strconv.FormatFloat(x, 'f', -1, 64))
	}
	return v
}

// dataJSON is the version's LaunchTemplateData as
// DescribeLaunchTemplateVersions answers it.
func (v *ltVersion) dataJSON() obj {
	d := obj{}
	var sgs []string
	disks := map[int]obj{}
	nics := map[int]obj{}
	nicSGs := map[int]map[int]string{}
	sgIdx := map[int]string{}
	for k, x := range v.data {
		head, rest, _ := strings.Cut(k, ".")
		n, field, _ := strings.Cut(rest, ".")
		i, err := strconv.Atoi(n)
		switch {
		case head == "SecurityGroupIds" && err == nil && field == "":
			sgIdx[i] = x
		case head == "DataDisk" && err == nil && field != "":
			if disks[i] == nil {
				disks[i] = obj{}
			}
			disks[i][field] = typed(k, x)
		case head == "NetworkInterface" && err == nil && field != "":
			if nics[i] == nil {
				nics[i] = obj{}
			}
			if sg, ok := strings.CutPrefix(field, "SecurityGroupIds."); ok {
				j, _ := strconv.Atoi(sg)
				if nicSGs[i] == nil {
					nicSGs[i] = map[int]string{}
				}
				nicSGs[i][j] = x
				continue
			}
			nics[i][field] = typed(k, x)
		default:
			d[k] = typed(k, x)
		}
	}
	sgs = inOrder(sgIdx)
	if len(sgs) > 0 {
		d["SecurityGroupIds"] = obj{"SecurityGroupId": sgs}
	}
	if len(disks) > 0 {
		d["DataDisks"] = obj{"DataDisk": inOrder(disks)}
	}
	for i, m := range nicSGs {
		if nics[i] == nil {
			nics[i] = obj{}
		}
		nics[i]["SecurityGroupIds"] = obj{"SecurityGroupId": inOrder(m)}
	}
	if len(nics) > 0 {
		d["NetworkInterfaces"] = obj{"NetworkInterface": inOrder(nics)}
	}
	tags := []obj{}
	for _, t := range v.tags {
		tags = append(tags, obj{"Key": t.Key, "Value": t.Value})
	}
	d["Tags"] = obj{"InstanceTag": tags}
	return d
}

// AddSystemImage is test setup: a public image of Alibaba Cloud's
// (ImageOwnerAlias system) in region, Available, which a launch template
// may name; it has no OSS object, so a Launcher cannot boot it. It
// returns the image's ID.
func (s *Server) AddSystemImage(region, name string) string {
	s.mu.Lock()
	defer s.mu.Unlock()
	now := time.Now()
	im := &image{id: newID("m-", 20), region: region, name: name, arch: "x86_64", bootMode: "UEFI", platform: "Others Linux",
		sizeGiB: 20, created: now, readyAt: now, owner: "system"}
	s.images[im.id] = im
	return im.id
}
