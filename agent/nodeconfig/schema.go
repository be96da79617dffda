package nodeconfig

import (
	"math"
	"strings"

	"gopkg.in/yaml.v3"
)

// config walks the document: every section is read even after a problem so
// that one run reports them all.
func (p *parser) config(root *yaml.Node) *Config {
	c := &Config{}
	top := p.fields(root, "", "apiVersion", "kind", "cluster", "kubelet", "containerd", "registries", "storage")
	if top == nil {
		return nil
	}
	if e, ok := set(top, "apiVersion"); !ok {
		p.add(root.Line, "apiVersion", "required; set it to %s", APIVersion)
	} else if v, ok := p.str(e.val, "apiVersion"); ok {
		if v != APIVersion {
			p.add(e.val.Line, "apiVersion", "unsupported version %q; this agent reads %s", v, APIVersion)
		}
		c.APIVersion = v
	}
	if e, ok := set(top, "kind"); !ok {
		p.add(root.Line, "kind", "required; set it to %s", Kind)
	} else if v, ok := p.str(e.val, "kind"); ok {
		if v != Kind {
			p.add(e.val.Line, "kind", "must be %s, got %q", Kind, v)
		}
		c.Kind = v
	}
	if e, ok := set(top, "cluster"); !ok {
		p.add(root.Line, "cluster", "required: the node needs the API server, its CA and a bootstrap token to join")
	} else {
		p.cluster(e, &c.Cluster)
	}
	c.Kubelet.MaxPods = DefaultMaxPods
	if e, ok := set(top, "kubelet"); ok {
		p.kubelet(e, &c.Kubelet)
	}
	c.Containerd.SandboxImage = DefaultSandboxImage
	if e, ok := set(top, "containerd"); ok {
		p.containerd(e, &c.Containerd)
	}
	if e, ok := set(top, "registries"); ok {
		p.registries(e, &c.Registries)
	}
	c.Storage = StorageAuto
	if e, ok := set(top, "storage"); ok {
		if v, ok := p.str(e.val, "storage"); ok {
			if !contains(storageModes, v) {
				p.add(e.val.Line, "storage", "must be one of %s, got %q (see docs/node-config.md, Container storage)", strings.Join(storageModes, ", "), v)
			}
			c.Storage = v
		}
	}
	return c
}

func (p *parser) cluster(at entry, c *Cluster) {
	const path = "cluster"
	f := p.fields(at.val, path, "server", "caData", "caHash", "bootstrapToken", "dns", "domain")
	if f == nil {
		return
	}
	if e, ok := set(f, "server"); !ok {
		p.add(at.line, "cluster.server", "required: the API server's https URL, e.g. https://10.0.0.1:6443")
	} else if v, ok := p.str(e.val, "cluster.server"); ok {
		if msg := checkServer(v); msg != "" {
			p.add(e.val.Line, "cluster.server", "%s", msg)
		}
		c.Server = v
	}

	caData, hasData := set(f, "caData")
	caHash, hasHash := set(f, "caHash")
	switch {
	case hasData && hasHash:
		p.add(caHash.line, "cluster", "caData and caHash are mutually exclusive; keep one")
	case !hasData && !hasHash:
		p.add(at.line, "cluster", "one of caData (the cluster CA certificate as PEM) or caHash (its sha256:<spki> pin) is required")
	}
	if hasData {
		if v, ok := p.str(caData.val, "cluster.caData"); ok {
			if msg := checkCAData(v); msg != "" {
				p.add(caData.val.Line, "cluster.caData", "%s", msg)
			}
			c.CAData = v
		}
	}
	if hasHash {
		if v, ok := p.str(caHash.val, "cluster.caHash"); ok {
			norm, msg := checkCAHash(v)
			if msg != "" {
				p.add(caHash.val.Line, "cluster.caHash", "%s", msg)
			}
			c.CAHash = norm
		}
	}

	if e, ok := set(f, "bootstrapToken"); !ok {
		p.add(at.line, "cluster.bootstrapToken", "required: a bootstrap token <id>.<secret> (kubeadm token create)")
	} else if v, ok := p.str(e.val, "cluster.bootstrapToken"); ok {
		// Never echo the token: errors end up on the serial console.
		switch {
		case redactedToken.MatchString(v) && p.joined:
		case redactedToken.MatchString(v):
			p.add(e.val.Line, "cluster.bootstrapToken", "the secret is redacted (a joined node's stored copy); give a bootstrap token <id>.<secret> (kubeadm token create)")
		case !bootstrapToken.MatchString(v):
			p.add(e.val.Line, "cluster.bootstrapToken", "must match [a-z0-9]{6}.[a-z0-9]{16} (create one with kubeadm token create)")
		}
		c.BootstrapToken = v
	}

	c.DNS = []string{DefaultClusterDNS}
	if e, ok := set(f, "dns"); ok {
		var dns []string
		if p.list(e.val, "cluster.dns", func(item *yaml.Node, ip string) {
			if v, ok := p.str(item, ip); ok {
				canon, msg := checkIP(v)
				if msg != "" {
					p.add(item.Line, ip, "%s", msg)
				}
				dns = append(dns, canon)
			}
		}) {
			if len(e.val.Content) == 0 {
				p.add(e.val.Line, "cluster.dns", "must list at least one IP; leave the field out for %s", DefaultClusterDNS)
			}
			c.DNS = dns
		}
	}

	c.Domain = DefaultDomain
	if e, ok := set(f, "domain"); ok {
		if v, ok := p.str(e.val, "cluster.domain"); ok {
			if msg := checkDomain(v); msg != "" {
				p.add(e.val.Line, "cluster.domain", "%s", msg)
			}
			c.Domain = v
		}
	}
}

func (p *parser) kubelet(at entry, k *Kubelet) {
	f := p.fields(at.val, "kubelet", "labels", "taints", "maxPods", "config")
	if f == nil {
		return
	}
	if e, ok := set(f, "labels"); ok {
		labels := map[string]string{}
		p.mapping(e.val, "kubelet.labels", func(key string, keyLine int, val *yaml.Node, path string) {
			if msg := checkUserLabelKey(key); msg != "" {
				p.add(keyLine, path, "%s", msg)
			}
			if v, ok := p.str(val, path); ok {
				if msg := checkLabelValue(v); msg != "" {
					p.add(val.Line, path, "%s", msg)
				}
				labels[key] = v
			}
		})
		if len(labels) > 0 {
			k.Labels = labels
		}
	}
	if e, ok := set(f, "taints"); ok {
		p.list(e.val, "kubelet.taints", func(item *yaml.Node, path string) {
			if v, ok := p.str(item, path); ok {
				t, msg := parseTaint(v)
				if msg != "" {
					p.add(item.Line, path, "%s", msg)
				}
				for _, prev := range k.Taints {
					if prev.Key == t.Key && prev.Effect == t.Effect && msg == "" {
						p.add(item.Line, path, "taint %s:%s is listed twice; keep one", t.Key, t.Effect)
					}
				}
				k.Taints = append(k.Taints, t)
			}
		})
	}
	if e, ok := set(f, "maxPods"); ok {
		if v, ok := p.int(e.val, "kubelet.maxPods", 1, math.MaxInt32); ok {
			k.MaxPods = int32(v)
		}
	}
	if e, ok := set(f, "config"); ok {
		k.Config = p.kubeletOverrides(e.val, "kubelet.config")
	}
}

func (p *parser) containerd(at entry, c *Containerd) {
	f := p.fields(at.val, "containerd", "sandboxImage", "mirrors")
	if f == nil {
		return
	}
	if e, ok := set(f, "sandboxImage"); ok {
		if v, ok := p.str(e.val, "containerd.sandboxImage"); ok {
			if msg := checkImage(v); msg != "" {
				p.add(e.val.Line, "containerd.sandboxImage", "%s", msg)
			}
			c.SandboxImage = v
		}
	}
	if e, ok := set(f, "mirrors"); ok {
		mirrors := map[string][]string{}
		p.mapping(e.val, "containerd.mirrors", func(host string, keyLine int, val *yaml.Node, path string) {
			if msg := checkRegistryHost(host); msg != "" {
				p.add(keyLine, path, "%s", msg)
			}
			urls := []string{}
			if p.list(val, path, func(item *yaml.Node, ip string) {
				if v, ok := p.str(item, ip); ok {
					if msg := checkMirrorURL(v); msg != "" {
						p.add(item.Line, ip, "%s", msg)
					}
					urls = append(urls, v)
				}
			}) && len(val.Content) == 0 {
				p.add(val.Line, path, "must list at least one mirror URL; leave the registry out to pull from it directly")
			}
			mirrors[host] = urls
		})
		if len(mirrors) > 0 {
			c.Mirrors = mirrors
		}
	}
}
