package kube

import (
	"context"
	"encoding/base64"
	"encoding/json"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
)

func TestClusterInfoCA(t *testing.T) {
	pemText := "-----BEGIN CERTIFICATE-----\nMIIB\n-----END CERTIFICATE-----\n"
	kubeconfig := "apiVersion: v1\nkind: Config\nclusters:\n- name: \"\"\n  cluster:\n    certificate-authority-data: " +
		base64.StdEncoding.EncodeToString([]byte(pemText)) + "\n    server: https://x:6443\n"
	srv := httptest.NewTLSServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.URL.Path != "/api/v1/namespaces/kube-public/configmaps/cluster-info" {
			http.NotFound(w, r)
			return
		}
		json.NewEncoder(w).Encode(map[string]any{"data": map[string]string{"kubeconfig": kubeconfig}})
	}))
	defer srv.Close()
	got, err := ClusterInfoCA(context.Background(), srv.URL)
	if err != nil || string(got) != pemText {
		t.Fatalf("got %q, %v", got, err)
	}
	_, err = ClusterInfoCA(context.Background(), srv.URL+"/nothing")
	if err == nil || !strings.Contains(err.Error(), "404") {
		t.Fatalf("missing cluster-info: %v", err)
	}
}
