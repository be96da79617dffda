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

// With cached images a kubelet that verifies pulled images (1.35 on)
// exempts their repositories, whatever it pulled before; without a cache,
// or a kubelet that would refuse the fields (1.34: the gate is off) or of
// an unknown version, the fields stay unset.
func TestKubeletConfigCachedRepositories(t *testing.T) {
	cached := []string{"nginx", "r.test/app"}
	for _, c := range []struct {
		version string
		repos   []string
		set     bool
	}{
		{"v1.37.2", nil, false},
		{"v1.37.2", cached, true},
		{"v1.35.0", cached, true},
		{"v1.34.4", cached, false},
		{"v1.35.0-rc.1", cached, false},
		{"", cached, false},
	} {
		f := facts
		f.CachedRepositories, f.KubeletVersion = c.repos, c.version
		repos := c.repos
		if !c.set {
			repos = nil
		}
		out, err := KubeletConfig(load(t, "full"), f)
		if err != nil {
			t.Fatal(err)
		}
		var kc kubeletv1beta1.KubeletConfiguration
		if err := yaml.UnmarshalStrict(out, &kc); err != nil {
			t.Fatal(err)
		}
		wantPolicy := kubeletv1beta1.ImagePullCredentialsVerificationPolicy("")
		if c.set {
			wantPolicy = kubeletv1beta1.NeverVerifyAllowlistedImages
		}
		if kc.ImagePullCredentialsVerificationPolicy != wantPolicy || !slices.Equal(kc.PreloadedImagesVerificationAllowlist, repos) {
			t.Errorf("kubelet %q, cached %q: policy %q, allowlist %q; want %q and %q\n%s", c.version, c.repos, kc.ImagePullCredentialsVerificationPolicy, kc.PreloadedImagesVerificationAllowlist, wantPolicy, repos, out)
		}
	}
}
