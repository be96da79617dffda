package recipe

import "testing"

// TestNumbersDoNotWrap: a mode or size too large for its field is an error,
// not its low bits (0x100000644 would otherwise be the mode 03104).
func TestNumbersDoNotWrap(t *testing.T) {
	for _, tc := range []struct{ name, yaml, want string }{
		{"file mode", "name: x\nfiles: [{path: /a, content: b, mode: 0x100000644}]\n", "r.yaml:2: files[0].mode: 0x100000644 is too large"},
		{"url mode", "name: x\nurls: [{name: u, url: 'https://h/x', sha256: " + sha + ", install: /u, mode: 4294967296}]\n", "r.yaml:2: urls[0].mode: 4294967296 is too large"},
		{"esp size", "name: x\nimage: {espSize: 9999999999GiB}\n", `r.yaml:2: image.espSize: "9999999999GiB": too large`},
		{"image size", "name: x\nimage: {size: 9223372036854775807KiB}\n", `r.yaml:2: image.size: "9223372036854775807KiB": too large`},
	} {
		_, err := Parse("r.yaml", []byte(tc.yaml))
		if err == nil || err.Error() != tc.want {
			t.Errorf("%s: error\n got: %v\nwant: %s", tc.name, err, tc.want)
		}
	}
	if n, err := ParseSize("8589934591GiB"); err != nil || n != 8589934591<<30 {
		t.Errorf("largest GiB size: %d, %v", n, err)
	}
}

// TestProblemsInStableOrder: the same recipe gives the same error text
// every time (units were checked in map order).
func TestProblemsInStableOrder(t *testing.T) {
	src := []byte("name: x\nunits: {enable: [a], disable: [b], mask: [c]}\nprefer: {b: x, a: y, c: z}\n")
	_, first := Parse("r.yaml", src)
	for range 20 {
		if _, err := Parse("r.yaml", src); err == nil || first == nil || err.Error() != first.Error() {
			t.Fatalf("problems differ between runs:\n%v\n---\n%v", first, err)
		}
	}
}

// TestEmptyKeyNamed: an empty key is still named in the error.
func TestEmptyKeyNamed(t *testing.T) {
	_, err := Parse("r.yaml", []byte("name: x\n\"\": 1\n"))
	want := `r.yaml:2: "": unknown field (known: extends, name, arch, epoch, debian, kernel, packages, prefer, go, urls, files, units, cmdline, image, sandbox, credentialProviders, secureBoot, cni, images, exclude, remove)`
	if err == nil || err.Error() != want {
		t.Errorf("got %v\nwant %s", err, want)
	}
}

const sha = "aaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaa"
