package lock

import (
	"strings"
	"testing"
)

const (
	idxDigest = "sha256:1111111111111111111111111111111111111111111111111111111111111111"
	manDigest = "sha256:2222222222222222222222222222222222222222222222222222222222222222"
)

func TestImageLines(t *testing.T) {
	l := sample()
	l.Images = []Image{
		{Ref: "r.test/z/app:v2@" + idxDigest, Platform: "linux/amd64", Manifest: manDigest, Size: 4096},
		{Ref: "r.test/a/app@" + manDigest, Platform: "linux/amd64", Manifest: manDigest, Size: 10},
	}
	text := l.Format("")
	want := "image r.test/a/app@" + manDigest + " linux/amd64 " + manDigest + " 10\nimage r.test/z/app:v2@" + idxDigest + " linux/amd64 " + manDigest + " 4096\n"
	if !strings.HasSuffix(string(text), want) {
		t.Fatalf("image lines not last, sorted by reference:\n%s", text)
	}
	got, err := Parse("x.lock", text)
	if err != nil {
		t.Fatal(err)
	}
	if len(got.Images) != 2 || got.Images[1] != l.Images[0] {
		t.Errorf("images did not round-trip: %+v", got.Images)
	}
	for _, c := range []struct{ line, want string }{
		{"image r.test/a/app:v1 linux/amd64 " + manDigest + " 10", "x.lock:4: image line wants <ref>@sha256:"},
		{"image r.test/a/app@" + manDigest + " linux/amd64 " + manDigest + " -1", `x.lock:4: size "-1" is not a positive number`},
		{"image r.test/a/app@" + manDigest + " linux/amd64 " + manDigest, `x.lock:4: "image" line wants 5 fields, has 4`},
	} {
		_, err := Parse("x.lock", []byte("lock 2\ninputs x\nepoch 1 x\n"+c.line+"\n"))
		if err == nil || !strings.Contains(err.Error(), c.want) {
			t.Errorf("%s: got %v, want %q", c.line, err, c.want)
		}
	}
}
