package conformance

import (
	"bytes"
	"context"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path"
	"path/filepath"
	"regexp"
	"runtime"
	"strings"

	v1 "github.com/google/go-containerregistry/pkg/v1"

	"github.com/drover-os/drover/harness/cluster"
	"github.com/drover-os/drover/image/cache"
	"github.com/drover-os/drover/image/deb"
	"github.com/drover-os/drover/image/fetch"
	"github.com/drover-os/drover/image/gomod"
	"github.com/drover-os/drover/image/tree"
)

// busyboxDeb is Debian trixie's busybox-static for amd64, as its signed
// Packages index lists it (the index drover lock verified for
// recipes/ecs-node.yaml): the archive path, size and sha256 the download
// is checked against. busybox-static because the binary needs no libc in
// the image.
var busyboxDeb = fetch.Item{
	Name:   "busybox-static_1.37.0-6+b9_amd64.deb",
	URL:    "pool/main/b/busybox/busybox-static_1.37.0-6+b9_amd64.deb",
	SHA256: "598a3fd92bdafc34cd81196b2952ad36e910e47a4ecf162f8ce5e8e262598e53",
	Size:   955316,
}

// Image is one test image the suite pulls, built here.
type Image struct {
	// Repo and Tag are where it is pushed, relative to the registry, as
	// the e2e framework names it under the repo list (RepoList).
	Repo, Tag string
	Index     v1.ImageIndex
	// From says what it was built from, for the report.
	From string
}

// BuildOptions say where the inputs come from.
type BuildOptions struct {
	CacheDir string
	Version  string // Kubernetes version: agnhost's source and the framework's image tags
	Mirror   string // Debian archive root (debian.ResolveMirror)
	Log      io.Writer
	BuildLog io.Writer // the go command's output
}

// BuildImages builds the test images the focused tests use, for amd64:
// agnhost from k8s.io/kubernetes/test/images/agnhost at Version, busybox
// from Debian's busybox-static, and the pause image (agnhost's own pause
// command, upstream's stand-in for it in its tests), each tagged as the
// framework of Version expects (read from its test/utils/image/manifest.go).
func BuildImages(ctx context.Context, o BuildOptions) ([]Image, error) {
	const goarch = "amd64"
	if runtime.GOARCH != goarch {
		return nil, fmt.Errorf("building the conformance test images: the busybox applet list is read by running busybox, so this host must be %s, not %s", goarch, runtime.GOARCH)
	}
	// The kubernetes module at the version: the framework's image tags and
	// agnhost's TLS pair are read from its source.
	k8sDir, err := gomod.ModuleDir(ctx, gomod.Env{WorkDir: filepath.Join(o.CacheDir, "tmp"), Log: o.BuildLog}, "k8s.io/kubernetes", o.Version)
	if err != nil {
		return nil, fmt.Errorf("reading the e2e framework's image tags and agnhost's files: %w", err)
	}
	tags, err := frameworkTags(k8sDir)
	if err != nil {
		return nil, err
	}
	agnhost, err := cluster.BuildKubernetesProgram(ctx, o.CacheDir, o.Version, "agnhost", "k8s.io/kubernetes/test/images/agnhost", o.Log, o.BuildLog)
	if err != nil {
		return nil, err
	}
	agnhostBin, err := os.ReadFile(agnhost)
	if err != nil {
		return nil, fmt.Errorf("reading agnhost: %w", err)
	}
	bb, err := busyboxEntries(ctx, o)
	if err != nil {
		return nil, err
	}
	var out []Image
	add := func(repo, tag, from string, entries []entry, entrypoint, cmd []string, user ...string) error {
		img, err := imageOf(repo, goarch, entries, entrypoint, cmd, strings.Join(user, ""))
		if err != nil {
			return err
		}
		out = append(out, Image{Repo: repo, Tag: tag, Index: indexOf(img, goarch), From: from})
		return nil
	}
	// busybox: upstream's is Docker's busybox image, sh as its command,
	// every applet in /bin (dockerBin); nonroot and nonewprivs are built
	// on it.
	bbBin := dockerBin(bb)
	if err := add("e2e-test-images/busybox", tags["BusyBox"], busyboxDeb.Name, bbBin, nil, []string{"sh"}); err != nil {
		return nil, err
	}
	// The test images' locked Debian userland (glibc.go): glibc-dns-testing
	// is it, and agnhost's image carries its tools.
	gl, err := glibcEntries(ctx, o)
	if err != nil {
		return nil, err
	}
	// agnhost: upstream's is alpine with agnhost at /agnhost, a link
	// agnhost-2 for the entrypoint tests, /uploads for netexec, the user
	// and group its SupplementalGroups test expects, porter's localhost
	// pair, and the tools its Dockerfile installs (curl, netcat, iproute2,
	// bind-tools, bash, socat): here busybox stands in for alpine's
	// busybox and the Debian userland for those packages. netexec serves
	// HTTPS with the localhost pair for the https lifecycle-hook specs.
	tls, err := agnhostTLS(k8sDir)
	if err != nil {
		return nil, err
	}
	// /bin/sh is dash, not busybox: Debian's busybox-static shell runs its
	// own applet for a name it has (nc, ip, …) whatever PATH holds, so the
	// specs' `/bin/sh -c "… | nc -w 1 -u …"` would get busybox's nc, which
	// has no -u; alpine's busybox shell, upstream's, finds netcat-openbsd's
	// on PATH.
	ag := append(append(withPasswd(withEntry(overlay(bb, gl), entry{path: "bin/sh", link: "/usr/bin/dash", mode: 0o777}), true), tls...),
		entry{path: "agnhost", mode: 0o755, data: agnhostBin},
		entry{path: "agnhost-2", link: "agnhost", mode: 0o777},
		entry{path: "uploads", dir: true, mode: 0o755})
	from := "k8s.io/kubernetes/test/images/agnhost@" + o.Version + " + " + busyboxDeb.Name + " + Debian trixie " +
		strings.Join(glibcPackages, ", ") + " (" + GlibcLockFile + ")"
	if err := add("e2e-test-images/agnhost", tags["Agnhost"], from, ag, []string{"/agnhost"}, []string{"pause"}); err != nil {
		return nil, err
	}
	// nonroot: upstream's is its base image, the busybox image, with USER
	// 1234 (the runAsNonRoot specs read the image's user).
	if err := add("e2e-test-images/nonroot", tags["NonRoot"], busyboxDeb.Name+", user 1234", bbBin, nil, []string{"sh"}, "1234"); err != nil {
		return nil, err
	}
	// nonewprivs: upstream's nnp (test/images/nonewprivs, prints its
	// effective uid) setuid root at /usr/local/bin/nnp, its command; the
	// AllowPrivilegeEscalation specs run it as uid 1000.
	nnp, err := cluster.BuildKubernetesProgram(ctx, o.CacheDir, o.Version, "nnp", "k8s.io/kubernetes/test/images/nonewprivs", o.Log, o.BuildLog)
	if err != nil {
		return nil, err
	}
	nnpBin, err := os.ReadFile(nnp)
	if err != nil {
		return nil, fmt.Errorf("reading nnp: %w", err)
	}
	nn := append(append([]entry(nil), bbBin...), entry{path: "usr/local", dir: true, mode: 0o755},
		entry{path: "usr/local/bin", dir: true, mode: 0o755},
		entry{path: "usr/local/bin/nnp", mode: 0o4755, data: nnpBin})
	if err := add("e2e-test-images/nonewprivs", tags["Nonewprivs"], "k8s.io/kubernetes/test/images/nonewprivs@"+o.Version+" + "+busyboxDeb.Name, nn, nil, []string{"nnp"}); err != nil {
		return nil, err
	}
	// glibc-dns-testing: upstream's is Debian with dnsutils; here the
	// locked trixie packages (glibc.go). Not coredns, which upstream
	// downloads from GitHub releases (docs/conformance.md).
	if err := add("e2e-test-images/glibc-dns-testing", tags["GlibcDnsTesting"], "Debian trixie "+strings.Join(glibcPackages, ", ")+" ("+GlibcLockFile+")", gl, nil, []string{"sh"}); err != nil {
		return nil, err
	}
	pause := []entry{{path: "pause", mode: 0o755, data: agnhostBin}}
	if err := add("k8s/pause", tags["Pause"], "agnhost pause", pause, []string{"/pause", "pause"}, nil); err != nil {
		return nil, err
	}
	return out, nil
}

// tagRE matches a line of the framework's image table, e.g.
// configs[Agnhost] = Config{list.PromoterE2eRegistry, "agnhost", "2.66.1"}.
var tagRE = regexp.MustCompile(`configs\[(\w+)\] = Config\{list\.(\w+), "([^"]+)", "([^"]+)"\}`)

// frameworkTags reads the tags the e2e framework of the version pulls
// (test/utils/image/manifest.go of the module at dir), so that an upgrade
// of Kubernetes moves them with it.
func frameworkTags(dir string) (map[string]string, error) {
	path := filepath.Join(dir, "test", "utils", "image", "manifest.go")
	src, err := os.ReadFile(path)
	if err != nil {
		return nil, fmt.Errorf("reading the e2e framework's image tags: %w", err)
	}
	return parseTags(path, src)
}

// parseTags reads the image table of the framework's manifest.go: the tag
// of each image by its name in the table (Agnhost, AgnhostPrev, BusyBox,
// …). The images built here must be in it.
func parseTags(path string, src []byte) (map[string]string, error) {
	tags := map[string]string{}
	for _, m := range tagRE.FindAllSubmatch(src, -1) {
		tags[string(m[1])] = string(m[4])
	}
	for _, want := range []string{"Agnhost", "BusyBox", "Pause", "NonRoot", "Nonewprivs", "GlibcDnsTesting"} {
		if tags[want] == "" {
			return nil, fmt.Errorf("%s: no configs[%s] line: the framework's image table changed; update harness/conformance", path, want)
		}
	}
	return tags, nil
}

// overlay lays top over base: an entry of top replaces base's entry of the
// same path, except that a symlink of top never replaces a directory of
// base. The Debian tree's merged-/usr links (/bin -> usr/bin, /sbin ->
// usr/sbin) meet busybox's directories there: busybox's applets stay where
// busybox put them, and each program of top under the link's target gets
// a link at the merged path unless busybox has one there (specs run
// /bin/bash, which merged /usr gives a Debian system).
func overlay(base, top []entry) []entry {
	byPath := map[string]int{}
	out := append([]entry(nil), base...)
	for i, e := range out {
		byPath[e.path] = i
	}
	merged := map[string]string{} // the link's path -> its target, for top's links over base's dirs
	for _, e := range top {
		i, ok := byPath[e.path]
		switch {
		case !ok:
			byPath[e.path] = len(out)
			out = append(out, e)
		case out[i].dir && e.link != "":
			merged[e.path] = path.Clean(strings.TrimPrefix(e.link, "/"))
		default:
			out[i] = e
		}
	}
	for _, e := range top {
		for link, target := range merged {
			rest, ok := strings.CutPrefix(e.path, target+"/")
			if !ok || e.dir || strings.Contains(rest, "/") {
				continue
			}
			p := link + "/" + rest
			if _, taken := byPath[p]; !taken {
				byPath[p] = len(out)
				out = append(out, entry{path: p, mode: 0o777, link: "/" + e.path})
			}
		}
	}
	return out
}

// withEntry returns es with e in place of the entry of its path.
func withEntry(es []entry, e entry) []entry {
	out := make([]entry, 0, len(es)+1)
	for _, x := range es {
		if x.path != e.path {
			out = append(out, x)
		}
	}
	return append(out, e)
}

// agnhostTLS is the certificate and key upstream's agnhost image holds at
// /localhost.crt and /localhost.key, read from test/images/agnhost/porter
// of the kubernetes module at dir (its Dockerfile ADDs them).
func agnhostTLS(dir string) ([]entry, error) {
	var out []entry
	for _, name := range []string{"localhost.crt", "localhost.key"} {
		data, err := os.ReadFile(filepath.Join(dir, "test", "images", "agnhost", "porter", name))
		if err != nil {
			return nil, fmt.Errorf("reading agnhost's %s: %w", name, err)
		}
		out = append(out, entry{path: name, mode: 0o644, data: data})
	}
	return out, nil
}

// busyboxEntries are busybox-static's /bin/busybox with a link for each
// applet it reports (busybox --list-full), /etc/passwd and /etc/group with
// root and nobody, and the directories a shell expects.
func busyboxEntries(ctx context.Context, o BuildOptions) ([]entry, error) {
	store, err := cache.Open(o.CacheDir)
	if err != nil {
		return nil, err
	}
	if o.Mirror == "" {
		return nil, fmt.Errorf("fetching %s: no Debian mirror (set DROVER_MIRROR or configure apt)", busyboxDeb.Name)
	}
	item := busyboxDeb
	item.URL = strings.TrimSuffix(o.Mirror, "/") + "/" + item.URL
	f := &fetch.Fetcher{Cache: store, Log: o.Log}
	path, err := f.FetchOne(ctx, item.Name, item.URL, item.SHA256, item.Size)
	if err != nil {
		return nil, fmt.Errorf("fetching %s: %w", item.Name, err)
	}
	r, err := os.Open(path)
	if err != nil {
		return nil, err
	}
	defer r.Close()
	t := tree.New()
	if _, err := deb.Extract(r, "busybox-static", t, deb.Options{}); err != nil {
		return nil, fmt.Errorf("extracting %s: %w", item.Name, err)
	}
	n := t.Get("/bin/busybox")
	if n == nil || n.Kind != tree.Regular {
		return nil, fmt.Errorf("%s has no /bin/busybox", item.Name)
	}
	applets, err := listApplets(ctx, n.Data, store.TempDir())
	if err != nil {
		return nil, err
	}
	es := []entry{{path: "bin/busybox", mode: 0o755, data: n.Data}}
	for _, d := range []string{"bin", "sbin", "usr", "usr/bin", "usr/sbin", "etc", "root", "var", "home"} {
		es = append(es, entry{path: d, dir: true, mode: 0o755})
	}
	es = append(es, entry{path: "tmp", dir: true, mode: 0o1777})
	for _, a := range applets {
		if a == "bin/busybox" {
			continue
		}
		es = append(es, entry{path: a, link: "/bin/busybox", mode: 0o777})
	}
	return withPasswd(es, false), nil
}

// dockerBin is the busybox layer as Docker's busybox image lays it out,
// upstream's busybox image and the base of its nonroot and nonewprivs:
// every applet in /bin (its build runs `busybox --install /bin`), so specs
// that run /bin/sysctl or /bin/env find them. Debian's paths (sbin/sysctl,
// usr/bin/env, from --list-full) stay beside them. agnhost keeps Debian's
// layout alone: upstream's is alpine, whose busybox splits its applets the
// same way, and a busybox nc in /bin would stand beside the netcat its
// Dockerfile installs.
func dockerBin(bb []entry) []entry {
	out := append([]entry(nil), bb...)
	have := map[string]bool{}
	for _, e := range bb {
		have[e.path] = true
	}
	for _, e := range bb {
		if e.link != "/bin/busybox" {
			continue
		}
		p := "bin/" + path.Base(e.path)
		if !have[p] {
			have[p] = true
			out = append(out, entry{path: p, link: "/bin/busybox", mode: 0o777})
		}
	}
	return out
}

// withPasswd adds /etc/passwd and /etc/group: root and nobody, and with
// agnhost the user and group agnhost's image defines for the
// SupplementalGroups test (uid 1000 in gid 50000). It replaces earlier
// ones.
func withPasswd(es []entry, agnhost bool) []entry {
	passwd := "root:x:0:0:root:/root:/bin/sh\nnobody:x:65534:65534:nobody:/home:/bin/false\n"
	group := "root:x:0:\nnobody:x:65534:\n"
	if agnhost {
		passwd += "user-defined-in-image:x:1000:1000::/home/user-defined-in-image:/bin/sh\n"
		group += "user-defined-in-image:x:1000:\ngroup-defined-in-image:x:50000:user-defined-in-image\n"
	}
	es = withEntry(es, entry{path: "etc/passwd", mode: 0o644, data: []byte(passwd)})
	return withEntry(es, entry{path: "etc/group", mode: 0o644, data: []byte(group)})
}

// listApplets runs busybox --list-full: the applets as paths relative to
// /, as busybox's own --install would link them.
func listApplets(ctx context.Context, bin []byte, tmp string) ([]string, error) {
	dir, err := os.MkdirTemp(tmp, "busybox-")
	if err != nil {
		return nil, err
	}
	defer os.RemoveAll(dir)
	p := filepath.Join(dir, "busybox")
	if err := os.WriteFile(p, bin, 0o755); err != nil {
		return nil, err
	}
	out, err := exec.CommandContext(ctx, p, "--list-full").Output()
	if err != nil {
		return nil, fmt.Errorf("busybox --list-full: %w", err)
	}
	var list []string
	for _, l := range strings.Split(string(bytes.TrimSpace(out)), "\n") {
		if l = strings.TrimSpace(l); l != "" {
			list = append(list, l)
		}
	}
	if len(list) < 100 {
		return nil, fmt.Errorf("busybox --list-full listed %d applets; busybox-static has about 400", len(list))
	}
	return list, nil
}
