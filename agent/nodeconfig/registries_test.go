package nodeconfig

import (
	"reflect"
	"slices"
	"strings"
	"testing"
)

func TestParseRegistries(t *testing.T) {
	c, err := Parse([]byte(with("registries:", "  acr:",
		"    regions: [cn-hangzhou, cn-shanghai]",
		"    instances:",
		"      - domain: myreg-registry-vpc.cn-beijing.cr.aliyuncs.com",
		"      - domain: known-registry.cn-hangzhou.cr.aliyuncs.com",
		"        id: cri-known1",
		"      - domain: images.example.com",
		"        id: cri-custom1",
		"        region: cn-shanghai",
		"    apiEndpoint: cr-vpc.{region}.aliyuncs.com",
	)), "node.yaml")
	if err != nil {
		t.Fatal(err)
	}
	want := &ACR{Regions: []string{"cn-hangzhou", "cn-shanghai"}, APIEndpoint: "cr-vpc.{region}.aliyuncs.com", Instances: []ACRInstance{
		{Domain: "myreg-registry-vpc.cn-beijing.cr.aliyuncs.com", Region: "cn-beijing"},
		{Domain: "known-registry.cn-hangzhou.cr.aliyuncs.com", ID: "cri-known1", Region: "cn-hangzhou"},
		{Domain: "images.example.com", ID: "cri-custom1", Region: "cn-shanghai"},
	}}
	if !reflect.DeepEqual(c.Registries.ACR, want) {
		t.Errorf("registries.acr = %+v, want %+v", c.Registries.ACR, want)
	}
	c, err = Parse([]byte(with()), "node.yaml")
	if err != nil || c.Registries.ACR != nil {
		t.Errorf("no registries: %+v, %v", c.Registries, err)
	}
}

func TestRegistriesProblems(t *testing.T) {
	for _, tc := range []struct {
		name  string
		lines []string
		want  []string
	}{
		{"unknown field", []string{"registries:", "  acr:", "    region: cn-hangzhou"},
			[]string{`node.yaml:9: registries.acr.region: unknown field; known fields here are regions, instances, apiEndpoint`}},
		{"unknown registry", []string{"registries:", "  ecr: {}"},
			[]string{`node.yaml:8: registries.ecr: unknown field; known fields here are acr`}},
		{"bad region", []string{"registries:", "  acr:", "    regions: [hangzhou, cn-hangzhou, cn-hangzhou]"},
			[]string{`node.yaml:9: registries.acr.regions[0]: "hangzhou" is not an Alibaba Cloud region ID such as cn-hangzhou or ap-southeast-1`,
				`node.yaml:9: registries.acr.regions[2]: region cn-hangzhou is listed twice; keep one`}},
		{"custom domain without id", []string{"registries:", "  acr:", "    instances:", "      - domain: images.example.com"},
			[]string{`node.yaml:10: registries.acr.instances[0]: images.example.com is not an ACR default domain (<instance>-registry[-vpc].<region>.cr.aliyuncs.com): a custom domain needs the instance's id and region`}},
		{"no domain", []string{"registries:", "  acr:", "    instances:", "      - id: cri-abc"},
			[]string{`node.yaml:10: registries.acr.instances[0].domain: required: the registry host the images name, e.g. myreg-registry.cn-hangzhou.cr.aliyuncs.com`}},
		{"bad id and host", []string{"registries:", "  acr:", "    instances:", "      - {domain: 'Images.example.com', id: abc, region: cn-shanghai}"},
			[]string{`node.yaml:10: registries.acr.instances[0].domain: "Images.example.com" is not a registry host such as myregistry-registry.cn-hangzhou.cr.aliyuncs.com (lower case, optional :port)`,
				`node.yaml:10: registries.acr.instances[0].id: "abc" is not an ACR Enterprise instance ID such as cri-kmsiwlxxdcvaduwb (the console's instance details)`}},
		{"region contradicts domain", []string{"registries:", "  acr:", "    instances:", "      - {domain: a-registry.cn-beijing.cr.aliyuncs.com, region: cn-hangzhou}"},
			[]string{`node.yaml:10: registries.acr.instances[0].region: cn-hangzhou, but the domain a-registry.cn-beijing.cr.aliyuncs.com is in cn-beijing; leave region out for a default domain`}},
		{"personal edition as instance", []string{"registries:", "  acr:", "    instances:", "      - domain: registry.cn-beijing.aliyuncs.com"},
			[]string{`node.yaml:10: registries.acr.instances[0].domain: registry.cn-beijing.aliyuncs.com is ACR Personal Edition, which has no instances: list its region under registries.acr.regions`}},
		{"twice", []string{"registries:", "  acr:", "    instances:", "      - domain: a-registry.cn-beijing.cr.aliyuncs.com", "      - domain: a-registry.cn-beijing.cr.aliyuncs.com"},
			[]string{`node.yaml:11: registries.acr.instances[1].domain: a-registry.cn-beijing.cr.aliyuncs.com is listed twice; keep one`}},
		{"endpoint with a path", []string{"registries:", "  acr:", "    apiEndpoint: https://cr.example.com/api"},
			[]string{`node.yaml:9: registries.acr.apiEndpoint: must be a scheme and a host only, got "https://cr.example.com/api"`}},
		{"endpoint not a host", []string{"registries:", "  acr:", "    apiEndpoint: 'cr vpc'"},
			[]string{`node.yaml:9: registries.acr.apiEndpoint: must be a host or URL such as cr-vpc.{region}.aliyuncs.com: "cr vpc" is not a registry host such as myregistry-registry.cn-hangzhou.cr.aliyuncs.com (lower case, optional :port)`}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			var got []string
			for _, p := range Validate([]byte(with(tc.lines...)), "node.yaml") {
				got = append(got, p.String())
			}
			if !reflect.DeepEqual(got, tc.want) {
				t.Errorf("Validate:\n got %q\nwant %q", got, tc.want)
			}
		})
	}
}

func TestCredentialProviderDefault(t *testing.T) {
	c := load(t, "full")
	// An image without the provider: nothing rendered, no flags.
	files, err := Render(c, facts, "", false)
	if err != nil {
		t.Fatal(err)
	}
	for _, f := range files {
		if f.Path == CredentialProviderConfigPath {
			t.Errorf("rendered %s for an image without the provider", f.Path)
		}
	}
	flags, _ := KubeletFlags(c, facts, "")
	if strings.Contains(strings.Join(flags, " "), "credential-provider") {
		t.Errorf("flags %q for an image without the provider", flags)
	}

	// With it: the instance's region, by default.
	f := facts
	f.ACRProvider = true
	cp, err := CredentialProviderConfig(c, f)
	if err != nil {
		t.Fatal(err)
	}
	golden(t, "full.credential-providers.yaml", cp)
	flags, err = KubeletFlags(c, f, "")
	if err != nil {
		t.Fatal(err)
	}
	for _, want := range []string{"--image-credential-provider-bin-dir=" + CredentialProviderBinDir, "--image-credential-provider-config=" + CredentialProviderConfigPath} {
		if !slices.Contains(flags, want) {
			t.Errorf("flags %q lack %s", flags, want)
		}
	}
	files, err = Render(c, f, "", false)
	if err != nil {
		t.Fatal(err)
	}
	found := false
	for _, file := range files {
		found = found || file.Path == CredentialProviderConfigPath && string(file.Data) == string(cp) && file.Mode == 0o644
	}
	if !found {
		t.Errorf("Render does not give %s", CredentialProviderConfigPath)
	}
}

func TestCredentialProviderFromNodeFile(t *testing.T) {
	c, err := Parse([]byte(with("registries:", "  acr:",
		"    regions: [cn-shanghai]",
		"    instances:",
		"      - domain: myreg-registry.cn-beijing.cr.aliyuncs.com",
		"      - domain: known-registry-vpc.cn-shanghai.cr.aliyuncs.com",
		"        id: cri-known1",
		"      - {domain: '100.64.0.2:5000', id: cri-harness1, region: cn-hangzhou}",
		"    apiEndpoint: http://100.64.0.2:8081",
	)), "node.yaml")
	if err != nil {
		t.Fatal(err)
	}
	f := facts
	f.ACRProvider = true
	cp, err := CredentialProviderConfig(c, f)
	if err != nil {
		t.Fatal(err)
	}
	golden(t, "registries.credential-providers.yaml", cp)

	// Turned off: regions empty and no instances.
	off, err := Parse([]byte(with("registries:", "  acr:", "    regions: []")), "node.yaml")
	if err != nil {
		t.Fatal(err)
	}
	if cp, err := CredentialProviderConfig(off, f); cp != nil || err != nil {
		t.Errorf("regions: [] rendered %q, %v", cp, err)
	}
	// Asked for on an image without the provider: the join fails, saying so.
	f.ACRProvider = false
	_, err = KubeletFlags(c, f, "")
	if err == nil || !strings.Contains(err.Error(), "registries.acr is set, but the image has no "+ACRProviderPath) {
		t.Errorf("registries.acr without the provider: %v", err)
	}
}
