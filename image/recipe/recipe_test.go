package recipe

import (
	"path/filepath"
	"strings"
	"testing"
)

func TestShippedRecipesParse(t *testing.T) {
	for _, name := range []string{"ecs-node", "minimal"} {
		r, err := Load(filepath.Join("..", "..", "recipes", name+".yaml"))
		if err != nil {
			t.Fatalf("%s: %v", name, err)
		}
		if r.Name != name || strings.Join(r.Debian.Suites, " ") != "trixie trixie-updates trixie-security" || r.Kernel != "linux-image-cloud-amd64" {
			t.Errorf("%s: unexpected recipe %+v", name, r)
		}
	}
}

func TestDefaults(t *testing.T) {
	r, err := Parse("r.yaml", []byte("name: x\npackages: [systemd]\nfiles:\n  - path: /etc/x\n    content: hi\n"))
	if err != nil {
		t.Fatal(err)
	}
	if r.Arch != "amd64" || strings.Join(r.Debian.Suites, " ") != "trixie trixie-updates trixie-security" || r.Debian.Components[0] != "main" ||
		r.Kernel != "linux-image-cloud-amd64" || r.Files[0].Mode != 0o644 || r.Image.Formats[0] != "raw" ||
		r.Image.RootFS.Compression != "none" {
		t.Errorf("defaults not applied: %+v", r)
	}
	if got := r.LockPath(); got != "r.yaml.lock" {
		t.Errorf("LockPath = %q", got)
	}
}

func TestErrors(t *testing.T) {
	for _, tc := range []struct{ name, yaml, want string }{
		{"unknown field", "name: x\npackges: [a]\n",
			"r.yaml:2: packges: unknown field (known: extends, name, arch, epoch, debian, kernel, packages, prefer, go, urls, files, units, cmdline, image, sandbox, credentialProviders, secureBoot, cni, images, exclude, remove)"},
		{"unknown nested field", "name: x\ndebian:\n  suite: trixie\n  mirror: foo\n",
			"r.yaml:4: debian.mirror: unknown field (known: suites, suite, components, keyring)"},
		{"wrong type list", "name: x\npackages: systemd\n",
			`r.yaml:2: packages: want a list, got "systemd"`},
		{"wrong type in list item", "name: x\ngo:\n  - name: k\n    replace: {a: b}\n",
			"r.yaml:4: go[0].replace: want a list, got a mapping"},
		{"wrong scalar type", "name: x\nepoch: soon\n",
			`r.yaml:2: epoch: want a whole number, got "soon"`},
		{"mode", "name: x\nfiles:\n  - path: /etc/a\n    content: a\n    mode: rwx\n",
			`r.yaml:5: files[0].mode: want a whole number, got "rwx"`},
		{"missing name", "packages: [ab]\n", "r.yaml:1: name: required: give the image a name (it names the output files)"},
		{"bad package", "name: x\npackages: [systemd, 'Bad Name']\n",
			`r.yaml:2: packages[1]: "Bad Name" is not a Debian package name (name or name=version)`},
		{"go version", "name: x\ngo:\n  - name: k\n    module: m\n    version: latest\n    package: m/cmd\n    install: /usr/bin/k\n",
			"r.yaml:5: go[0].version: required: an exact module version such as v1.36.3 (no 'latest')"},
		{"replace syntax", "name: x\ngo:\n  - name: k\n    module: m\n    version: v1.0.0\n    package: m\n    install: /usr/bin/k\n    replace: ['a b']\n",
			`r.yaml:8: go[0].replace[0]: "a b": write it as in go.mod: 'old => new version'`},
		{"url sha", "name: x\nurls:\n  - name: u\n    url: https://example.invalid/x\n    sha256: abc\n    install: /usr/bin/u\n",
			"r.yaml:5: urls[0].sha256: required: the 64 lower-case hex digits of the file's sha256"},
		{"url scheme", "name: x\nurls:\n  - name: u\n    url: ftp://h/x\n    sha256: " + strings.Repeat("a", 64) + "\n    install: /u\n",
			`r.yaml:4: urls[0].url: "ftp://h/x": want an https URL`},
		{"file both", "name: x\nfiles:\n  - path: /etc/a\n    content: a\n    source: b\n",
			"r.yaml:3: files[0]: give exactly one of content (inline) or source (a file beside the recipe)"},
		{"format", "name: x\nimage:\n  formats: [raw, vmdk]\n",
			`r.yaml:3: image.formats[1]: "vmdk": supported formats are raw, qcow2 and vhd`},
		{"compression", "name: x\nimage:\n  rootfs:\n    compression: gzip\n",
			`r.yaml:4: image.rootfs.compression: "gzip": supported are none, lz4, lz4hc, zstd`},
		{"rootfs field", "name: x\nimage:\n  rootfs:\n    compress: lz4\n",
			"r.yaml:4: image.rootfs.compress: unknown field (known: compression, extentSize)"},
		{"extent not a power of two", "name: x\nimage:\n  rootfs:\n    extentSize: 96KiB\n",
			`r.yaml:4: image.rootfs.extentSize: "96KiB": want a power of two from 8KiB to 1MiB (the kernel's largest compressed cluster)`},
		{"extent too large", "name: x\nimage:\n  rootfs:\n    extentSize: 2MiB\n",
			`r.yaml:4: image.rootfs.extentSize: "2MiB": want a power of two from 8KiB to 1MiB (the kernel's largest compressed cluster)`},
		{"extent not a size", "name: x\nimage:\n  rootfs:\n    extentSize: 1M\n",
			`r.yaml:4: image.rootfs.extentSize: "1M": want a size such as 64MiB or 2GiB`},
		{"credential provider unknown", "name: x\ncredentialProviders: [ecr]\n",
			`r.yaml:2: credentialProviders[0]: "ecr" is not a credential provider drover ships; known: acr`},
		{"credential provider twice", "name: x\ncredentialProviders: [acr, acr]\n",
			`r.yaml:2: credentialProviders[1]: "acr" is listed twice`},
		{"sandbox digest", "name: x\nsandbox:\n  digest: sha256:ABC\n",
			`r.yaml:3: sandbox.digest: "sha256:ABC" is not an image index digest: want sha256: and 64 lowercase hex digits, as ` + "`drover build`" + ` prints it`},
		{"size", "name: x\nimage:\n  size: 2G\n",
			`r.yaml:3: image.size: "2G": want a size such as 64MiB or 2GiB`},
		{"unit", "name: x\nunits:\n  enable: [sshd]\n",
			`r.yaml:3: units.enable[0]: "sshd" is not a systemd unit name`},
		{"arch", "name: x\narch: riscv64\n", `r.yaml:2: arch: "riscv64": supported are amd64 and arm64`},
		{"empty", "", "r.yaml: empty recipe; it needs at least a name"},
		{"exclude without why", "name: x\nexclude:\n  - package: cpio\n",
			"r.yaml:3: exclude[0].why: required: say why the node does not need cpio"},
		{"exclude a root", "name: x\npackages: [cpio]\nexclude:\n  - package: cpio\n    why: w\n",
			`r.yaml:4: exclude[0].package: "cpio" is also asked for by packages or kernel: drop one of the two`},
		{"exclude twice", "name: x\nexclude:\n  - {package: cpio, why: w}\n  - {package: cpio, why: w}\n",
			`r.yaml:4: exclude[1].package: "cpio" is excluded twice`},
		{"exclude version", "name: x\nexclude:\n  - {package: cpio=2.15, why: w}\n",
			`r.yaml:3: exclude[0].package: "cpio=2.15": want the name of a Debian package of the closure (no version)`},
		{"remove arch", "name: x\nremove:\n  - {glob: /usr/bin/su, why: w, arch: x86_64}\n",
			`r.yaml:3: remove[0].arch: "x86_64": supported are amd64 and arm64 (or leave it out: every architecture)`},
		{"remove relative", "name: x\nremove:\n  - {glob: usr/bin/su, why: w}\n",
			`r.yaml:3: remove[0].glob: "usr/bin/su": want a clean absolute path or glob below /`},
		{"remove bad glob", "name: x\nremove:\n  - {glob: \"/usr/[a\", why: w}\n",
			`r.yaml:3: remove[0].glob: "/usr/[a": syntax error in pattern (path.Match syntax: *, ?, [...])`},
		{"suite and suites", "name: x\ndebian:\n  suite: trixie\n  suites: [trixie]\n",
			"r.yaml:3: debian.suite: give debian.suites or debian.suite, not both (suite: X is suites: [X])"},
		{"suites of two releases", "name: x\ndebian:\n  suites: [trixie, bookworm-security]\n",
			`r.yaml:3: debian.suites[1]: "bookworm-security" is not a suite of release trixie (the first suite): want one of trixie-updates, trixie-security, trixie-proposed-updates, trixie-backports`},
		{"security first", "name: x\ndebian:\n  suites: [trixie-security, trixie]\n",
			`r.yaml:3: debian.suites[0]: "trixie-security": the first suite is the release itself (e.g. trixie), the others its updates (trixie-updates, trixie-security)`},
		{"suite twice", "name: x\ndebian:\n  suites: [trixie, trixie-updates, trixie-updates]\n",
			`r.yaml:3: debian.suites[2]: "trixie-updates" is listed twice`},
		{"cni plugin name", "name: x\ncni:\n  plugins: [bridge, ../sbin/sh]\n",
			`r.yaml:3: cni.plugins[1]: "../sbin/sh" is not a CNI plugin name: want the name of a file in /usr/lib/cni, such as bridge`},
		{"cni plugin twice", "name: x\ncni:\n  plugins:\n    - bridge\n    - loopback\n    - bridge\n",
			`r.yaml:6: cni.plugins[2]: "bridge" is listed twice`},
		{"cni plugins not a list", "name: x\ncni:\n  plugins: bridge\n",
			`r.yaml:3: cni.plugins: want a list, got "bridge"`},
		{"cni unknown field", "name: x\ncni:\n  plugin: [bridge]\n",
			"r.yaml:3: cni.plugin: unknown field (known: plugins)"},
		{"remove without why", "name: x\nremove:\n  - glob: /usr/bin/su\n",
			"r.yaml:3: remove[0].why: required: say why the node does not need /usr/bin/su"},
		{"credential import", "name: x\ncmdline:\n  - console=ttyS0\n  - systemd.import_credentials=yes\n",
			`r.yaml:4: cmdline[1]: "systemd.import_credentials=yes": drover sets systemd.import_credentials=no itself: system credentials come from SMBIOS and fw_cfg, which the hypervisor sets; remove it`},
		{"credential import, initrd spelling", "name: x\ncmdline: [rd.systemd.import-credentials=1]\n",
			`r.yaml:2: cmdline[0]: "rd.systemd.import-credentials=1": drover sets systemd.import_credentials=no itself: system credentials come from SMBIOS and fw_cfg, which the hypervisor sets; remove it`},
		{"credential on the command line", "name: x\ncmdline: [quiet, 'systemd.set_credential=tmpfiles.extra:f /x']\n",
			`r.yaml:2: cmdline[1]: "systemd.set_credential=tmpfiles.extra:f /x": systemd.import_credentials=no, which drover sets, makes systemd ignore it; put the file in files: instead`},
	} {
		t.Run(tc.name, func(t *testing.T) {
			_, err := Parse("r.yaml", []byte(tc.yaml))
			if err == nil {
				t.Fatalf("no error, want %q", tc.want)
			}
			if err.Error() != tc.want {
				t.Errorf("error\n got: %s\nwant: %s", err, tc.want)
			}
		})
	}
}

// TestCNIPlugins: a recipe that says nothing ships the default plugins; one
// that lists them ships exactly those, an empty list none; each listed
// plugin's place is kept for the build's errors; and the choice, a
// file-level one, never makes the lock stale.
func TestCNIPlugins(t *testing.T) {
	for _, tc := range []struct {
		name, yaml string
		want       []string
		named      bool
	}{
		{"absent", "name: x\n", DefaultCNIPlugins(), false},
		{"plugins left out", "name: x\ncni: {}\n", DefaultCNIPlugins(), false},
		{"listed", "name: x\ncni:\n  plugins: [loopback, ptp]\n", []string{"loopback", "ptp"}, true},
		{"none", "name: x\ncni:\n  plugins: []\n", []string{}, true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			r, err := Parse("r.yaml", []byte(tc.yaml))
			if err != nil {
				t.Fatal(err)
			}
			got, named := r.CNIPlugins()
			if strings.Join(got, " ") != strings.Join(tc.want, " ") || named != tc.named || got == nil {
				t.Errorf("CNIPlugins() = %q, %v; want %q, %v", got, named, tc.want, tc.named)
			}
			base, _ := Parse("r.yaml", []byte("name: x\n"))
			if r.InputsDigest() != base.InputsDigest() {
				t.Error("cni changed the inputs digest: a lock would go stale for a file-level choice")
			}
		})
	}
	if d := DefaultCNIPlugins(); strings.Join(d, " ") != "bridge host-local loopback portmap" {
		t.Errorf("default %q: the documented setups (docs/recipes.md) need bridge, host-local, loopback and portmap", d)
	}
	r, err := Parse("r.yaml", []byte("name: x\ncni:\n  plugins:\n    - loopback\n    - ptp\n"))
	if err != nil {
		t.Fatal(err)
	}
	if strings.Join(r.CNI.At, " ") != "r.yaml:4 r.yaml:5" {
		t.Errorf("At = %q, want each plugin's line", r.CNI.At)
	}
}

func TestAllErrorsReported(t *testing.T) {
	_, err := Parse("r.yaml", []byte("nam: x\npackages: 3\ncmdline: {}\n"))
	if err == nil || strings.Count(err.Error(), "\n") != 2 {
		t.Fatalf("want three errors, got %v", err)
	}
}

func TestInputsDigest(t *testing.T) {
	a, _ := Parse("r.yaml", []byte("name: x\npackages: [systemd]\n"))
	b, _ := Parse("r.yaml", []byte("name: x\npackages: [systemd]\ncmdline: [quiet]\n"))
	c, _ := Parse("r.yaml", []byte("name: x\npackages: [systemd, udev]\n"))
	if a.InputsDigest() != b.InputsDigest() {
		t.Error("cmdline must not change the inputs digest")
	}
	if a.InputsDigest() == c.InputsDigest() {
		t.Error("packages must change the inputs digest")
	}
}

// TestShippedOverlays: each per-minor recipe is the default recipe with
// only its name and the kubelet's version changed, and its lock is its own.
func TestShippedOverlays(t *testing.T) {
	base, err := Load(filepath.Join("..", "..", "recipes", "ecs-node.yaml"))
	if err != nil {
		t.Fatal(err)
	}
	for _, minor := range []string{"34", "35", "36"} {
		r, err := Load(filepath.Join("..", "..", "recipes", "ecs-node-1."+minor+".yaml"))
		if err != nil {
			t.Fatalf("1.%s: %v", minor, err)
		}
		k := r.GoComponent("kubelet")
		if r.Name != "ecs-node-1."+minor || k == nil || !strings.HasPrefix(k.Version, "v1."+minor+".") {
			t.Errorf("1.%s: name %q, kubelet %+v", minor, r.Name, k)
			continue
		}
		if bk := base.GoComponent("kubelet"); bk.Version == k.Version {
			t.Errorf("1.%s: same kubelet as the default recipe", minor)
		}
		k.Version = base.GoComponent("kubelet").Version
		if r.InputsDigest() != base.InputsDigest() {
			t.Errorf("1.%s: differs from ecs-node.yaml in more than the kubelet's version", minor)
		}
		if !strings.HasSuffix(r.LockPath(), "ecs-node-1."+minor+".yaml.lock") {
			t.Errorf("1.%s: lock %s", minor, r.LockPath())
		}
	}
}

// TestSBATGeneration: the UKI's SBAT generation defaults to 1, is taken as
// written, an overlay can raise it, and it does not decide the lock.
func TestSBATGeneration(t *testing.T) {
	gen := func(text string) uint32 {
		t.Helper()
		r, err := Parse("r.yaml", []byte(text))
		if err != nil {
			t.Fatal(err)
		}
		return r.SecureBoot.SBATGeneration
	}
	if g := gen("name: x\n"); g != 1 {
		t.Errorf("default generation %d, want 1", g)
	}
	if g := gen("name: x\nsecureBoot:\n  sbatGeneration: 3\n"); g != 3 {
		t.Errorf("generation %d, want 3", g)
	}
	a, _ := Parse("r.yaml", []byte("name: x\npackages: [systemd]\n"))
	b, _ := Parse("r.yaml", []byte("name: x\npackages: [systemd]\nsecureBoot: {sbatGeneration: 7}\n"))
	if a.InputsDigest() != b.InputsDigest() {
		t.Error("secureBoot.sbatGeneration must not change the inputs digest (no re-lock for a revocation)")
	}
	dir := writeRecipes(t, map[string]string{
		"base.yaml": "name: base\nsecureBoot:\n  sbatGeneration: 2\n",
		"over.yaml": "extends: base.yaml\nname: over\nsecureBoot:\n  sbatGeneration: 5\n",
		"same.yaml": "extends: base.yaml\nname: same\n",
	})
	for name, want := range map[string]uint32{"over.yaml": 5, "same.yaml": 2} {
		r, err := Load(filepath.Join(dir, name))
		if err != nil {
			t.Fatal(err)
		}
		if r.SecureBoot.SBATGeneration != want {
			t.Errorf("%s: generation %d, want %d", name, r.SecureBoot.SBATGeneration, want)
		}
	}
	for text, want := range map[string]string{
		"name: x\nsecureBoot:\n  sbatGeneration: 0\n":          `r.yaml:3: secureBoot.sbatGeneration: 0: SBAT generations start at 1 (leave the field out for 1)`,
		"name: x\nsecureBoot:\n  sbatGeneration: 0x0\n":        `r.yaml:3: secureBoot.sbatGeneration: 0: SBAT generations start at 1 (leave the field out for 1)`,
		"name: x\nsecureBoot:\n  sbatGeneration: 2147483648\n": `r.yaml:3: secureBoot.sbatGeneration: 2147483648: at most 2147483647 (shim reads a generation as a C int)`,
		"name: x\nsecureBoot:\n  sbatGeneration: -1\n":         `r.yaml:3: secureBoot.sbatGeneration: want a whole number, got "-1"`,
		"name: x\nsecureBoot:\n  sbatGeneration: two\n":        `r.yaml:3: secureBoot.sbatGeneration: want a whole number, got "two"`,
		"name: x\nsecureBoot:\n  sbat: 2\n":                    `r.yaml:3: secureBoot.sbat: unknown field (known: sbatGeneration)`,
	} {
		if _, err := Parse("r.yaml", []byte(text)); err == nil || err.Error() != want {
			t.Errorf("%q: error %v, want %s", text, err, want)
		}
	}
}

// TestRootsKernel: a recipe's roots are its packages and its kernel; a
// package set made in code without a kernel (a conformance test image's)
// asks for no empty package name.
func TestRootsKernel(t *testing.T) {
	r := &Recipe{Packages: []string{"dash", "hostname"}, Kernel: "linux-image-cloud-amd64"}
	if got := strings.Join(r.Roots(), " "); got != "dash hostname linux-image-cloud-amd64" {
		t.Errorf("roots %q", got)
	}
	r.Kernel = ""
	if got := strings.Join(r.Roots(), " "); got != "dash hostname" {
		t.Errorf("roots without a kernel %q", got)
	}
}
