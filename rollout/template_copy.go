package rollout

import (
	"bytes"
	"encoding/json"
	"fmt"
	"slices"
	"sort"
	"strconv"
)

// A new launch template version is the base version's launch data with
// another ImageId and UserData. ECS's CreateLaunchTemplateVersion has no
// "from version N" parameter, so drover sends the data back, and sends it
// from the JSON DescribeLaunchTemplateVersions answered, not from the SDK's
// ecs.LaunchTemplateData: that struct turns an omitted boolean into an
// explicit false (a data disk's DeleteWithInstance: the disk would outlive
// its instance and be billed) and drops every field newer than the SDK.
// So what was absent stays absent, false stays false, a field drover does
// not know is sent back under its own name, and a structure it cannot map
// to request parameters stops the rollout before anything is created.

// Wrappers of the answer's lists and the request parameter each one's
// items go back as (ecs.LaunchTemplateData vs
// ecs.CreateLaunchTemplateVersionRequest).
var templateLists = map[string]struct{ item, param string }{
	"SecurityGroupIds":  {"SecurityGroupId", "SecurityGroupIds"},
	"DataDisks":         {"DataDisk", "DataDisk"},
	"NetworkInterfaces": {"NetworkInterface", "NetworkInterface"},
	"Tags":              {"InstanceTag", "Tag"},
}

// templateParams are the CreateLaunchTemplateVersion parameters that
// recreate data, a version's LaunchTemplateData as decoded with
// json.Decoder.UseNumber, with the image and user-data left out (the
// caller sets them). Two things are not copied as they are:
//   - SecurityGroupId beside a non-empty SecurityGroupIds (of the
//     instance, or of a NIC): the request refuses both at once, and the
//     answer may carry the single one as an echo of the list; it is
//     dropped when the list holds it, and a single one the list does not
//     hold is an error (which one ECS uses is not documented);
//   - ImageOwnerAlias, which describes the old ImageId: kept only when it
//     is self (drover's images are the account's own), else dropped.
func templateParams(data map[string]any) (map[string]string, error) {
	out := map[string]string{}
	for _, k := range sortedKeys(data) {
		v := data[k]
		switch k {
		case "ImageId", "UserData":
			continue
		case "ImageOwnerAlias":
			if v == "self" {
				out[k] = "self"
			}
			continue
		}
		if l, ok := templateLists[k]; ok {
			items, err := listItems(k, l.item, v)
			if err != nil {
				return nil, err
			}
			for i, it := range items {
				if err := flatten(out, fmt.Sprintf("%s.%d", l.param, i+1), it, k == "NetworkInterfaces"); err != nil {
					return nil, err
				}
			}
			continue
		}
		if err := flatten(out, k, v, false); err != nil {
			return nil, err
		}
	}
	if err := oneSecurityGroupForm(out, ""); err != nil {
		return nil, err
	}
	for i := 1; ; i++ {
		p := fmt.Sprintf("NetworkInterface.%d.", i)
		if !hasPrefix(out, p) {
			break
		}
		if err := oneSecurityGroupForm(out, p); err != nil {
			return nil, err
		}
	}
	return out, nil
}

// listItems unwraps {"<item>": [...]}; an empty or absent list is none.
func listItems(key, item string, v any) ([]any, error) {
	if v == nil {
		return nil, nil
	}
	m, ok := v.(map[string]any)
	if !ok {
		return nil, fmt.Errorf("launch template data: %s is %T, not an object holding %s: drover cannot copy it", key, v, item)
	}
	for k := range m {
		if k != item {
			return nil, fmt.Errorf("launch template data: %s holds %q besides %s: drover cannot copy it", key, k, item)
		}
	}
	switch l := m[item].(type) {
	case nil:
		return nil, nil
	case []any:
		return l, nil
	default:
		return nil, fmt.Errorf("launch template data: %s.%s is %T, not a list: drover cannot copy it", key, item, l)
	}
}

// flatten writes v under name: a scalar as its text (an empty string or
// null is an unset field and is left out), an object's scalars as
// name.<key>. inNIC also maps a NIC's SecurityGroupIds list. Lists
// elsewhere are refused: their parameter names cannot be guessed.
func flatten(out map[string]string, name string, v any, inNIC bool) error {
	switch x := v.(type) {
	case nil:
	case string:
		if x != "" {
			out[name] = x
		}
	case bool:
		out[name] = strconv.FormatBool(x)
	case json.Number:
		out[name] = x.String()
	case map[string]any:
		for _, k := range sortedKeys(x) {
			if inNIC && k == "SecurityGroupIds" {
				items, err := listItems(name+".SecurityGroupIds", "SecurityGroupId", x[k])
				if err != nil {
					return err
				}
				for i, it := range items {
					if err := flatten(out, fmt.Sprintf("%s.SecurityGroupIds.%d", name, i+1), it, false); err != nil {
						return err
					}
				}
				continue
			}
			if err := flatten(out, name+"."+k, x[k], false); err != nil {
				return err
			}
		}
	default:
		return fmt.Errorf("launch template data: %s is a %T: drover cannot copy it to a new version; create the version by hand (its data with the new ImageId and UserData) and point the group at it", name, v)
	}
	return nil
}

// oneSecurityGroupForm keeps prefix+SecurityGroupId or the list
// prefix+SecurityGroupIds.N, not both.
func oneSecurityGroupForm(out map[string]string, prefix string) error {
	single, ok := out[prefix+"SecurityGroupId"]
	if !ok {
		return nil
	}
	var list []string
	for i := 1; ; i++ {
		v, ok := out[fmt.Sprintf("%sSecurityGroupIds.%d", prefix, i)]
		if !ok {
			break
		}
		list = append(list, v)
	}
	switch {
	case len(list) == 0:
		return nil
	case slices.Contains(list, single):
		delete(out, prefix+"SecurityGroupId")
		return nil
	}
	return fmt.Errorf("launch template data: %sSecurityGroupId %s is not among %sSecurityGroupIds %v, and a version takes only one of them: set the security groups of the group's version in one form and run again", prefix, single, prefix, list)
}

func hasPrefix(m map[string]string, p string) bool {
	for k := range m {
		if len(k) > len(p) && k[:len(p)] == p {
			return true
		}
	}
	return false
}

func sortedKeys[V any](m map[string]V) []string {
	ks := make([]string, 0, len(m))
	for k := range m {
		ks = append(ks, k)
	}
	sort.Strings(ks)
	return ks
}

// rawTemplateData reads the LaunchTemplateData of each version in a raw
// DescribeLaunchTemplateVersions answer, by version number, numbers kept
// as json.Number.
func rawTemplateData(body []byte) (map[int64]map[string]any, error) {
	var raw struct {
		LaunchTemplateVersionSets struct {
			LaunchTemplateVersionSet []struct {
				VersionNumber      int64
				LaunchTemplateData map[string]any
			}
		}
	}
	dec := json.NewDecoder(bytes.NewReader(body))
	dec.UseNumber()
	if err := dec.Decode(&raw); err != nil {
		return nil, fmt.Errorf("reading DescribeLaunchTemplateVersions' answer: %w", err)
	}
	out := map[int64]map[string]any{}
	for _, s := range raw.LaunchTemplateVersionSets.LaunchTemplateVersionSet {
		out[s.VersionNumber] = s.LaunchTemplateData
	}
	return out, nil
}
