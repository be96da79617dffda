package recipe

import (
	"strings"
	"testing"
)

const (
	digestA = "sha256:0123456789abcdef0123456789abcdef0123456789abcdef0123456789abcdef"
	digestB = "sha256:fedcba9876543210fedcba9876543210fedcba9876543210fedcba9876543210"
)

func TestCachedImages(t *testing.T) {
	r, err := Parse("r.yaml", []byte("name: x\npackages: [systemd]\nimages:\n"+
		"  - ref: registry.example.test/app/web:v1@"+digestA+"\n"+
		"  - ref: registry.example.test:5000/ml/model@"+digestB+"\n    platform: linux/arm64\n    location: disk\n"))
	if err != nil {
		t.Fatal(err)
	}
	if len(r.Images) != 2 || r.Images[0].Location != LocationRoot || r.Images[1].Location != LocationDisk || !r.HasDiskImages() {
		t.Fatalf("images = %+v", r.Images)
	}
	if p := r.ImagePlatform(r.Images[0]); p != "linux/amd64" {
		t.Errorf("default platform = %q", p)
	}
	if repo, tag, d := r.Images[0].Parsed(); repo != "registry.example.test/app/web" || tag != "v1" || d != digestA {
		t.Errorf("Parsed = %q %q %q", repo, tag, d)
	}
	if repo, tag, d := r.Images[1].Parsed(); repo != "registry.example.test:5000/ml/model" || tag != "" || d != digestB {
		t.Errorf("Parsed = %q %q %q", repo, tag, d)
	}
	// The lock covers what is fetched, not where it ships.
	before := r.InputsDigest()
	r.Images[1].Location = LocationRoot
	if r.InputsDigest() != before {
		t.Error("the location changed the inputs digest")
	}
	r.Images[1].Ref = "registry.example.test:5000/ml/model@" + digestA
	if r.InputsDigest() == before {
		t.Error("a changed image digest left the inputs digest as it was: the lock would not go stale")
	}
}

func TestCachedImageErrors(t *testing.T) {
	for _, c := range []struct{ yaml, want string }{
		{"  - ref: registry.example.test/app/web:v1\n",
			`r.yaml:4: images[0].ref: "registry.example.test/app/web:v1" has no digest: a cached image is pinned by content; write it as registry.example.test/app/web:v1@sha256:<digest of the index or manifest>`},
		{"  - ref: registry.example.test/app/web@sha256:abc\n", `r.yaml:4: images[0].ref: "registry.example.test/app/web@sha256:abc": `},
		{"  - ref: app/web@" + digestA + "\n", `images[0].ref: "app/web@` + digestA + `": strict validation requires the registry`},
		{"  - platform: linux/amd64\n", "r.yaml:4: images[0].ref: required"},
		{"  - ref: r.test/a@" + digestA + "\n    location: usr\n", `r.yaml:5: images[0].location: "usr": want root`},
		{"  - ref: r.test/a@" + digestA + "\n    platform: amd64\n", `r.yaml:5: images[0].platform: "amd64": want linux/<arch>`},
		{"  - ref: r.test/a@" + digestA + "\n  - ref: r.test/a@" + digestA + "\n", `r.yaml:5: images[1].ref: "r.test/a@` + digestA + `" is listed twice (also images[0])`},
	} {
		_, err := Parse("r.yaml", []byte("name: x\npackages: [systemd]\nimages:\n"+c.yaml))
		if err == nil || !strings.Contains(err.Error(), c.want) {
			t.Errorf("%q: got %v, want %q", c.yaml, err, c.want)
		}
	}
}
