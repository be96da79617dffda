package nodeconfig

import (
	"slices"
	"testing"

	kubeletv1beta1 "k8s.io/kubelet/config/v1beta1"
	"sigs.k8s.io/yaml"
)

// The cached repositories are the names the kubelet compares with a pod's
// image after cutting its tag and digest (pullmanager's trimImageTagDigest),
// in every form a pod may write a Docker Hub image.
func TestImageCacheRepositories(t *testing.T) {
	c := ImageCache{
		Root: []CachedImage{
			{Names: []string{"r.test:5000/team/app:v1", "r.test:5000/team/app@sha256:aa"}},
			{Names: []string{"docker.io/library/nginx:1.27", "docker.io/library/nginx@sha256:bb"}},
		},
		Disk: &CacheDisk{Images: []CachedImage{
			{Names: []string{"r.test:5000/team/app:v2", "r.test:5000/team/app@sha256:cc"}},
			{Names: []string{"docker.io/bitnami/redis@sha256:dd"}},
		}},
	}
	want := []string{"bitnami/redis", "docker.io/bitnami/redis", "docker.io/library/nginx", "library/nginx", "nginx", "r.test:5000/team/app"}
	if got := c.Repositories(); !slices.Equal(got, want) {
		t.Errorf("Repositories() = %q, want %q", got, want)
	}
	if got := (ImageCache{}).Repositories(); len(got) != 0 {
		t.Errorf("no cache: Repositories() = %q, want none", got)
	}
}

// With cached images the kubelet exempts their repositories from pull
// credential verification, whatever it pulled before; without, it keeps
// its default policy (the field unset).
func TestKubeletConfigCachedRepositories(t *testing.T) {
	for _, repos := range [][]string{nil, {"nginx", "r.test/app"}} {
		f := facts
		f.CachedRepositories = repos
		out, err := KubeletConfig(load(t, "full"), f)
		if err != nil {
			t.Fatal(err)
		}
		var kc kubeletv1beta1.KubeletConfiguration
		if err := yaml.UnmarshalStrict(out, &kc); err != nil {
			t.Fatal(err)
		}
		wantPolicy := kubeletv1beta1.ImagePullCredentialsVerificationPolicy("")
		if len(repos) > 0 {
			wantPolicy = kubeletv1beta1.NeverVerifyAllowlistedImages
		}
		if kc.ImagePullCredentialsVerificationPolicy != wantPolicy || !slices.Equal(kc.PreloadedImagesVerificationAllowlist, repos) {
			t.Errorf("cached %q: policy %q, allowlist %q; want %q and the cached repositories\n%s", repos, kc.ImagePullCredentialsVerificationPolicy, kc.PreloadedImagesVerificationAllowlist, wantPolicy, out)
		}
	}
}
