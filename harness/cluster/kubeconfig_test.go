package cluster

import (
	"encoding/base64"
	"testing"

	"gopkg.in/yaml.v3"
)

func TestKubeconfigMarshal(t *testing.T) {
	data, err := Kubeconfig{ClusterName: "c", Server: "https://127.0.0.1:6443", CAPEM: []byte("CA"), User: "u",
		CertPEM: []byte("CERT"), KeyPEM: []byte("KEY")}.Marshal()
	if err != nil {
		t.Fatal(err)
	}
	var f kcFile
	if err := yaml.Unmarshal(data, &f); err != nil {
		t.Fatalf("%v\n%s", err, data)
	}
	dec := func(s string) string { b, _ := base64.StdEncoding.DecodeString(s); return string(b) }
	if f.APIVersion != "v1" || f.Kind != "Config" || len(f.Clusters) != 1 || len(f.Users) != 1 || len(f.Contexts) != 1 {
		t.Fatalf("kubeconfig:\n%s", data)
	}
	if f.Clusters[0].Cluster.Server != "https://127.0.0.1:6443" || dec(f.Clusters[0].Cluster.CAData) != "CA" {
		t.Errorf("cluster = %+v", f.Clusters[0])
	}
	if dec(f.Users[0].User.CertData) != "CERT" || dec(f.Users[0].User.KeyData) != "KEY" || f.Users[0].User.Token != "" {
		t.Errorf("user = %+v", f.Users[0])
	}
	if f.CurrentContext != f.Contexts[0].Name || f.Contexts[0].Context.Cluster != "c" || f.Contexts[0].Context.User != "u" {
		t.Errorf("context = %+v, current %q", f.Contexts[0], f.CurrentContext)
	}

	// cluster-info: a cluster and nothing else.
	data, err = Kubeconfig{Server: "https://100.64.0.2:6443", CAPEM: []byte("CA")}.Marshal()
	if err != nil {
		t.Fatal(err)
	}
	f = kcFile{}
	if err := yaml.Unmarshal(data, &f); err != nil {
		t.Fatal(err)
	}
	if len(f.Clusters) != 1 || f.Users != nil || f.Contexts != nil || f.CurrentContext != "" {
		t.Errorf("cluster-info kubeconfig:\n%s", data)
	}
}
