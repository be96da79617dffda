package acr

import (
	"path"
	"strings"
	"testing"
)

func TestParse(t *testing.T) {
	for _, tc := range []struct {
		host string
		want Registry
		ok   bool
	}{
		{"registry.cn-hangzhou.aliyuncs.com", Registry{Host: "registry.cn-hangzhou.aliyuncs.com", Edition: Personal, Region: "cn-hangzhou"}, true},
		{"registry-vpc.cn-shanghai.aliyuncs.com", Registry{Host: "registry-vpc.cn-shanghai.aliyuncs.com", Edition: Personal, Region: "cn-shanghai"}, true},
		{"registry-intl.ap-southeast-1.aliyuncs.com", Registry{Host: "registry-intl.ap-southeast-1.aliyuncs.com", Edition: Personal, Region: "ap-southeast-1"}, true},
		{"registry-intl-vpc.eu-central-1.aliyuncs.com", Registry{Host: "registry-intl-vpc.eu-central-1.aliyuncs.com", Edition: Personal, Region: "eu-central-1"}, true},
		{"Registry.CN-Hangzhou.aliyuncs.com", Registry{Host: "registry.cn-hangzhou.aliyuncs.com", Edition: Personal, Region: "cn-hangzhou"}, true},
		{"myreg-registry.cn-hangzhou.cr.aliyuncs.com", Registry{Host: "myreg-registry.cn-hangzhou.cr.aliyuncs.com", Edition: Enterprise, Region: "cn-hangzhou", InstanceName: "myreg"}, true},
		{"myreg-registry-vpc.cn-hangzhou.cr.aliyuncs.com", Registry{Host: "myreg-registry-vpc.cn-hangzhou.cr.aliyuncs.com", Edition: Enterprise, Region: "cn-hangzhou", InstanceName: "myreg"}, true},
		// An instance whose name itself ends in -registry.
		{"team-registry-registry.cn-beijing.cr.aliyuncs.com", Registry{Host: "team-registry-registry.cn-beijing.cr.aliyuncs.com", Edition: Enterprise, Region: "cn-beijing", InstanceName: "team-registry"}, true},
		{"cn-shanghai-finance-1", Registry{}, false},
		{"registry.cn-hangzhou.aliyuncs.com:443", Registry{}, false},      // default domains have no port
		{"registry2.cn-hangzhou.aliyuncs.com", Registry{}, false},         // not a Personal prefix
		{"-registry.cn-hangzhou.cr.aliyuncs.com", Registry{}, false},      // no instance name
		{"myreg.cn-hangzhou.cr.aliyuncs.com", Registry{}, false},          // no -registry
		{"myreg-registry.cn_hangzhou.cr.aliyuncs.com", Registry{}, false}, // not a region
		{"myreg-registry.cn-hangzhou.cr.aliyuncs.com.evil.com", Registry{}, false},
		{"a.myreg-registry.cn-hangzhou.cr.aliyuncs.com", Registry{}, false},
		{"docker.io", Registry{}, false},
		{"100.64.0.2:5000", Registry{}, false},
	} {
		got, ok := Parse(tc.host)
		if ok != tc.ok || got != tc.want {
			t.Errorf("Parse(%q) = %+v, %v; want %+v, %v", tc.host, got, ok, tc.want, tc.ok)
		}
	}
}

// kubeletMatch is the kubelet's matchImages rule for a host (its
// credentialprovider URLsMatch): as many labels, each matched by
// path.Match (a glob stays within its label), ports equal.
func kubeletMatch(pattern, host string) bool {
	ph, pport, _ := strings.Cut(pattern, ":")
	hh, hport, _ := strings.Cut(host, ":")
	if pport != hport {
		return false
	}
	pl, hl := strings.Split(ph, "."), strings.Split(hh, ".")
	if len(pl) != len(hl) {
		return false
	}
	for i := range pl {
		if ok, _ := path.Match(pl[i], hl[i]); !ok {
			return false
		}
	}
	return true
}

// The patterns drover gives the kubelet for a region must send it exactly
// the hosts Parse reads as that region's ACR: a host matched and not
// parsed would be asked for and answered "none"; one parsed and not
// matched would never be asked for.
func TestMatchImagesAgreeWithParse(t *testing.T) {
	patterns := MatchImages("cn-hangzhou")
	for _, host := range []string{
		"registry.cn-hangzhou.aliyuncs.com",
		"registry-vpc.cn-hangzhou.aliyuncs.com",
		"registry-intl.cn-hangzhou.aliyuncs.com",
		"registry-intl-vpc.cn-hangzhou.aliyuncs.com",
		"myreg-registry.cn-hangzhou.cr.aliyuncs.com",
		"myreg-registry-vpc.cn-hangzhou.cr.aliyuncs.com",
		"a-b-registry.cn-hangzhou.cr.aliyuncs.com",
		"registry.cn-shanghai.aliyuncs.com",
		"myreg-registry.cn-shanghai.cr.aliyuncs.com",
		"myreg.cn-hangzhou.cr.aliyuncs.com",
		"x.myreg-registry.cn-hangzhou.cr.aliyuncs.com",
		"registry.cn-hangzhou.aliyuncs.com:5000",
		"docker.io",
	} {
		matched := false
		for _, p := range patterns {
			matched = matched || kubeletMatch(p, host)
		}
		reg, ok := Parse(host)
		parsed := ok && reg.Region == "cn-hangzhou"
		if matched != parsed {
			t.Errorf("%s: matched by %v = %v, but Parse says ACR in cn-hangzhou = %v", host, patterns, matched, parsed)
		}
	}
}

func TestImageHost(t *testing.T) {
	for image, want := range map[string]string{
		"myreg-registry.cn-hangzhou.cr.aliyuncs.com/ns/app:v1": "myreg-registry.cn-hangzhou.cr.aliyuncs.com",
		"registry.cn-hangzhou.aliyuncs.com/ns/app@sha256:abc":  "registry.cn-hangzhou.aliyuncs.com",
		"100.64.0.2:5000/drover/hello:v1":                      "100.64.0.2:5000",
		"localhost/app":                                        "localhost",
		"library/nginx":                                        "docker.io",
		"nginx":                                                "docker.io",
		"Registry.CN-Hangzhou.aliyuncs.com/ns/app":             "registry.cn-hangzhou.aliyuncs.com",
	} {
		if got := ImageHost(image); got != want {
			t.Errorf("ImageHost(%q) = %q, want %q", image, got, want)
		}
	}
}

func TestChecks(t *testing.T) {
	for _, tc := range []struct {
		what  string
		check func(string) string
		v     string
		ok    bool
	}{
		{"region", CheckRegion, "cn-hangzhou", true},
		{"region", CheckRegion, "cn-shanghai-finance-1", true},
		{"region", CheckRegion, "hangzhou", false},
		{"region", CheckRegion, "CN-hangzhou", false},
		{"id", CheckInstanceID, "cri-kmsiwlxxdcvaduwb", true},
		{"id", CheckInstanceID, "kmsiwlxxdcvaduwb", false},
		{"id", CheckInstanceID, "cri-", false},
		{"host", CheckHost, "reg.example.com", true},
		{"host", CheckHost, "100.64.0.2:5000", true},
		{"host", CheckHost, "reg.example.com:0", false},
		{"host", CheckHost, "Reg.example.com", false},
		{"host", CheckHost, "https://reg.example.com", false},
		{"host", CheckHost, "reg.example.com/path", false},
	} {
		if msg := tc.check(tc.v); (msg == "") != tc.ok {
			t.Errorf("check %s %q = %q, want ok %v", tc.what, tc.v, msg, tc.ok)
		}
	}
}
