package cluster

import (
	"encoding/base64"
	"fmt"

	"gopkg.in/yaml.v3"
)

// Kubeconfig is the subset of the kubeconfig format this package writes:
// one cluster, at most one user, one context.
type Kubeconfig struct {
	ClusterName string
	Server      string
	CAPEM       []byte
	User        string // empty: no user (cluster-info)
	CertPEM     []byte // client certificate, or
	KeyPEM      []byte
	Token       string // a bearer token
}

type kcCluster struct {
	Name    string `yaml:"name"`
	Cluster struct {
		Server string `yaml:"server"`
		CAData string `yaml:"certificate-authority-data"`
	} `yaml:"cluster"`
}

type kcUser struct {
	Name string `yaml:"name"`
	User struct {
		CertData string `yaml:"client-certificate-data,omitempty"`
		KeyData  string `yaml:"client-key-data,omitempty"`
		Token    string `yaml:"token,omitempty"`
	} `yaml:"user"`
}

type kcContext struct {
	Name    string `yaml:"name"`
	Context struct {
		Cluster string `yaml:"cluster"`
		User    string `yaml:"user"`
	} `yaml:"context"`
}

type kcFile struct {
	APIVersion     string         `yaml:"apiVersion"`
	Kind           string         `yaml:"kind"`
	Clusters       []kcCluster    `yaml:"clusters"`
	Users          []kcUser       `yaml:"users,omitempty"`
	Contexts       []kcContext    `yaml:"contexts,omitempty"`
	CurrentContext string         `yaml:"current-context,omitempty"`
	Preferences    map[string]any `yaml:"preferences"`
}

// Marshal renders k as kubeconfig YAML with the credentials embedded (the
// *-data fields are base64 of the PEM), so the file works wherever it is
// copied.
func (k Kubeconfig) Marshal() ([]byte, error) {
	b64 := base64.StdEncoding.EncodeToString
	f := kcFile{APIVersion: "v1", Kind: "Config", Preferences: map[string]any{}}
	var c kcCluster
	c.Name = k.ClusterName
	c.Cluster.Server, c.Cluster.CAData = k.Server, b64(k.CAPEM)
	f.Clusters = append(f.Clusters, c)
	if k.User != "" {
		var u kcUser
		u.Name = k.User
		if len(k.CertPEM) > 0 {
			u.User.CertData, u.User.KeyData = b64(k.CertPEM), b64(k.KeyPEM)
		}
		u.User.Token = k.Token
		f.Users = append(f.Users, u)
		var x kcContext
		x.Name = k.User + "@" + k.ClusterName
		x.Context.Cluster, x.Context.User = k.ClusterName, k.User
		f.Contexts = append(f.Contexts, x)
		f.CurrentContext = x.Name
	}
	out, err := yaml.Marshal(&f)
	if err != nil {
		return nil, fmt.Errorf("rendering kubeconfig for %s: %w", k.Server, err)
	}
	return out, nil
}
