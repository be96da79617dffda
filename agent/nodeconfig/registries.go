package nodeconfig

import (
	"fmt"
	"net/url"
	"slices"
	"strings"
	"time"

	"github.com/drover-os/drover/agent/acr"
	"gopkg.in/yaml.v3"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	kubeletv1 "k8s.io/kubelet/config/v1"
	sigsyaml "sigs.k8s.io/yaml"
)

// Where the kubelet finds its image credential provider: the plugin
// drover build ships (cmd/drover-acr-credential-provider) and the
// configuration the agent renders for it.
const (
	CredentialProviderBinDir     = "/usr/lib/drover/credential-providers"
	ACRProviderName              = "drover-acr-credential-provider"
	ACRProviderPath              = CredentialProviderBinDir + "/" + ACRProviderName
	CredentialProviderConfigPath = "/etc/kubernetes/credential-providers.yaml"
	// acrDefaultCacheDuration is the kubelet's cache of an answer without
	// a cacheDuration; the provider always gives one (the token's life).
	acrDefaultCacheDuration = 10 * time.Minute
)

// Registries is the node file's registries section.
type Registries struct {
	// ACR configures the kubelet's credential provider for Alibaba Cloud
	// Container Registry; nil when the node file has no registries.acr.
	ACR *ACR
}

// ACR is registries.acr: which ACR registries the node pulls from with its
// RAM role.
type ACR struct {
	// Regions whose ACR default domains (Personal and Enterprise) get
	// credentials; nil means the instance's own region.
	Regions []string
	// Instances are Enterprise instances named by domain: a custom domain
	// (with its ID and region), or a default one whose ID saves the
	// provider a ListInstance.
	Instances []ACRInstance
	// APIEndpoint is the ACR API endpoint (host or URL, "{region}" for the
	// registry's region); empty: cr.<region>.aliyuncs.com.
	APIEndpoint string
}

// ACRInstance is one registries.acr.instances entry.
type ACRInstance struct {
	Domain, ID, Region string
}

func (p *parser) registries(at entry, r *Registries) {
	f := p.fields(at.val, "registries", "acr")
	if f == nil {
		return
	}
	if e, ok := set(f, "acr"); ok {
		r.ACR = &ACR{}
		p.acr(e, r.ACR)
	}
}

func (p *parser) acr(at entry, a *ACR) {
	f := p.fields(at.val, "registries.acr", "regions", "instances", "apiEndpoint")
	if f == nil {
		return
	}
	if e, ok := set(f, "regions"); ok {
		a.Regions = []string{}
		p.list(e.val, "registries.acr.regions", func(item *yaml.Node, path string) {
			if v, ok := p.str(item, path); ok {
				if msg := acr.CheckRegion(v); msg != "" {
					p.add(item.Line, path, "%s", msg)
				} else if slices.Contains(a.Regions, v) {
					p.add(item.Line, path, "region %s is listed twice; keep one", v)
				}
				a.Regions = append(a.Regions, v)
			}
		})
	}
	if e, ok := set(f, "instances"); ok {
		p.list(e.val, "registries.acr.instances", func(item *yaml.Node, path string) {
			in, ok := p.acrInstance(item, path)
			if !ok {
				return
			}
			for _, prev := range a.Instances {
				if prev.Domain == in.Domain {
					p.add(item.Line, path+".domain", "%s is listed twice; keep one", in.Domain)
				}
			}
			a.Instances = append(a.Instances, in)
		})
	}
	if e, ok := set(f, "apiEndpoint"); ok {
		if v, ok := p.str(e.val, "registries.acr.apiEndpoint"); ok {
			if msg := checkAPIEndpoint(v); msg != "" {
				p.add(e.val.Line, "registries.acr.apiEndpoint", "%s", msg)
			}
			a.APIEndpoint = v
		}
	}
}

func (p *parser) acrInstance(n *yaml.Node, path string) (ACRInstance, bool) {
	f := p.fields(n, path, "domain", "id", "region")
	if f == nil {
		return ACRInstance{}, false
	}
	var in ACRInstance
	before := len(p.problems)
	str := func(key string, check func(string) string) {
		if e, ok := set(f, key); ok {
			if v, ok := p.str(e.val, path+"."+key); ok {
				if msg := check(v); msg != "" {
					p.add(e.val.Line, path+"."+key, "%s", msg)
				}
				switch key {
				case "domain":
					in.Domain = v
				case "id":
					in.ID = v
				case "region":
					in.Region = v
				}
			}
		}
	}
	str("domain", acr.CheckHost)
	str("id", acr.CheckInstanceID)
	str("region", acr.CheckRegion)
	if in.Domain == "" {
		if _, ok := set(f, "domain"); !ok {
			p.add(n.Line, path+".domain", "required: the registry host the images name, e.g. myreg-registry.cn-hangzhou.cr.aliyuncs.com")
		}
		return in, false
	}
	def, isDefault := acr.Parse(in.Domain)
	switch {
	case isDefault && def.Edition == acr.Personal:
		p.add(n.Line, path+".domain", "%s is ACR Personal Edition, which has no instances: list its region under registries.acr.regions", in.Domain)
	case isDefault && in.Region != "" && in.Region != def.Region:
		p.add(n.Line, path+".region", "%s, but the domain %s is in %s; leave region out for a default domain", in.Region, in.Domain, def.Region)
	case isDefault:
		in.Region = def.Region
	case in.ID == "" || in.Region == "":
		p.add(n.Line, path, "%s is not an ACR default domain (<instance>-registry[-vpc].<region>.cr.aliyuncs.com): "+
			"a custom domain needs the instance's id and region", in.Domain)
	}
	return in, len(p.problems) == before
}

func checkAPIEndpoint(v string) string {
	host := strings.ReplaceAll(v, "{region}", "cn-hangzhou")
	if strings.Contains(host, "://") {
		u, err := url.Parse(host)
		switch {
		case err != nil:
			return fmt.Sprintf("not a URL (%v)", err)
		case u.Scheme != "http" && u.Scheme != "https":
			return fmt.Sprintf("must be an http or https URL or a host, got %q", v)
		case u.User != nil || u.RawQuery != "" || u.Fragment != "" || (u.Path != "" && u.Path != "/"):
			return fmt.Sprintf("must be a scheme and a host only, got %q", v)
		}
		host = u.Host
	}
	if msg := acr.CheckHost(host); msg != "" {
		return fmt.Sprintf("must be a host or URL such as cr-vpc.{region}.aliyuncs.com: %s", msg)
	}
	return ""
}

// acrEnabled says whether the node gets the ACR credential provider: the
// image ships it and the node file does not turn it off (an empty regions
// list and no instances), or the node file asks for it (an error when the
// image lacks it).
func acrEnabled(c *Config, f Facts) (bool, error) {
	a := c.Registries.ACR
	if a == nil {
		return f.ACRProvider, nil
	}
	if a.Regions != nil && len(a.Regions) == 0 && len(a.Instances) == 0 {
		return false, nil
	}
	if !f.ACRProvider {
		return false, fmt.Errorf("registries.acr is set, but the image has no %s: build it from a recipe with credentialProviders: [acr] "+
			"(docs/recipes.md), or remove registries.acr", ACRProviderPath)
	}
	return true, nil
}

// ACRMatchImages are the kubelet matchImages of the ACR provider: every
// default domain of each region (the instance's own by default), then the
// instances' domains not covered by those.
func ACRMatchImages(c *Config, f Facts) []string {
	regions := []string{f.RegionID}
	var instances []ACRInstance
	if a := c.Registries.ACR; a != nil {
		if a.Regions != nil {
			regions = a.Regions
		}
		instances = a.Instances
	}
	var out []string
	for _, r := range regions {
		out = append(out, acr.MatchImages(r)...)
	}
	for _, in := range instances {
		if def, ok := acr.Parse(in.Domain); ok && slices.Contains(regions, def.Region) {
			continue
		}
		out = append(out, in.Domain)
	}
	return out
}

// CredentialProviderConfig renders the kubelet's CredentialProviderConfig
// (kubelet.config.k8s.io/v1) for the ACR provider; nil when the node gets
// none (see acrEnabled).
func CredentialProviderConfig(c *Config, f Facts) ([]byte, error) {
	on, err := acrEnabled(c, f)
	if err != nil || !on {
		return nil, err
	}
	if msg := acr.CheckRegion(f.RegionID); msg != "" && (c.Registries.ACR == nil || c.Registries.ACR.Regions == nil) {
		return nil, fmt.Errorf("rendering %s: the instance's region: %s", CredentialProviderConfigPath, msg)
	}
	var args []string
	if a := c.Registries.ACR; a != nil {
		for _, in := range a.Instances {
			if in.ID != "" {
				args = append(args, "--instance=domain="+in.Domain+",id="+in.ID+",region="+in.Region)
			}
		}
		if a.APIEndpoint != "" {
			args = append(args, "--api-endpoint="+a.APIEndpoint)
		}
	}
	cfg := kubeletv1.CredentialProviderConfig{
		TypeMeta: metav1.TypeMeta{APIVersion: kubeletv1.SchemeGroupVersion.String(), Kind: "CredentialProviderConfig"},
		Providers: []kubeletv1.CredentialProvider{{
			Name:                 ACRProviderName,
			APIVersion:           "credentialprovider.kubelet.k8s.io/v1",
			MatchImages:          ACRMatchImages(c, f),
			DefaultCacheDuration: &metav1.Duration{Duration: acrDefaultCacheDuration},
			Args:                 args,
		}},
	}
	out, err := sigsyaml.Marshal(&cfg)
	if err != nil {
		return nil, fmt.Errorf("encoding %s: %w", CredentialProviderConfigPath, err)
	}
	return out, nil
}

// credentialProviderFlags are the kubelet flags that turn the provider on.
func credentialProviderFlags(c *Config, f Facts) ([]string, error) {
	on, err := acrEnabled(c, f)
	if err != nil || !on {
		return nil, err
	}
	return []string{"--image-credential-provider-bin-dir=" + CredentialProviderBinDir,
		"--image-credential-provider-config=" + CredentialProviderConfigPath}, nil
}
