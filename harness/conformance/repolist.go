package conformance

import (
	"fmt"
	"sort"
	"strings"
)

// repoPrefixes maps each registry of the e2e framework's RegistryList
// (k8s.io/kubernetes/test/utils/image, the keys of KUBE_TEST_REPO_LIST)
// to a path on the harness registry. Every one points there, so no image
// reference the suite forms names another registry: what is not built
// here is not found (404), never fetched from elsewhere.
var repoPrefixes = map[string]string{
	"promoterE2eRegistry":      "e2e-test-images",
	"buildImageRegistry":       "build-image",
	"invalidRegistry":          "invalid",
	"gcEtcdRegistry":           "k8s",
	"gcRegistry":               "k8s",
	"sigStorageRegistry":       "sig-storage",
	"privateRegistry":          "k8s-authenticated-test",
	"dockerLibraryRegistry":    "library",
	"cloudProviderGcpRegistry": "cloud-provider-gcp",
}

// RepoList is the KUBE_TEST_REPO_LIST file for a registry the node reaches
// at host ("100.64.0.2:5000").
func RepoList(host string) []byte {
	keys := make([]string, 0, len(repoPrefixes))
	for k := range repoPrefixes {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	var b strings.Builder
	b.WriteString("# KUBE_TEST_REPO_LIST for drover conformance: every registry is the harness's.\n")
	for _, k := range keys {
		fmt.Fprintf(&b, "%s: %s/%s\n", k, host, repoPrefixes[k])
	}
	return []byte(b.String())
}
