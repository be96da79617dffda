package ociimages

import (
	"slices"
	"testing"
)

// Names are what containerd's CRI looks a pod's image up by: a pull of
// the reference would store the same (Docker Hub as docker.io, an official
// image under library/).
func TestNames(t *testing.T) {
	const d = "sha256:a552c0c35a03e06bccc6b702700677984943017c51b81931333d249ad38c37d5"
	for _, c := range []struct {
		ref  string
		want []string
	}{
		{"registry.example.test:5000/team/app:v1@" + d, []string{"registry.example.test:5000/team/app:v1", "registry.example.test:5000/team/app@" + d}},
		{"registry.example.test/team/app@" + d, []string{"registry.example.test/team/app@" + d}},
		{"docker.io/library/nginx:1.27@" + d, []string{"docker.io/library/nginx:1.27", "docker.io/library/nginx@" + d}},
		{"index.docker.io/bitnami/redis:7@" + d, []string{"docker.io/bitnami/redis:7", "docker.io/bitnami/redis@" + d}},
	} {
		got, err := Names(c.ref)
		if err != nil || !slices.Equal(got, c.want) {
			t.Errorf("Names(%s) = %q, %v; want %q", c.ref, got, err, c.want)
		}
	}
}
