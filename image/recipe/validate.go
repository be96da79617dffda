package recipe

import (
	"fmt"
	"maps"
	"math"
	"net/url"
	"path"
	"regexp"
	"slices"
	"strconv"
	"strings"

	"github.com/drover-os/drover/image/arch"
	"github.com/drover-os/drover/image/gomod"
	"gopkg.in/yaml.v3"
)

var (
	nameRE    = regexp.MustCompile(`^[a-z0-9][a-z0-9._-]*$`)
	pkgRE     = regexp.MustCompile(`^[a-z0-9][a-z0-9.+-]+(=[A-Za-z0-9.+~:-]+)?$`)
	sha256RE  = regexp.MustCompile(`^[0-9a-f]{64}$`)
	replaceRE = regexp.MustCompile(`^(\S+)(?: (\S+))? => (\S+) (\S+)$`)
	unitRE    = regexp.MustCompile(`^[A-Za-z0-9:_.@\\-]+\.(service|socket|target|timer|mount|path|slice)$`)
	sizeRE    = regexp.MustCompile(`^([0-9]+)(B|KiB|MiB|GiB)$`)
)

// validator collects semantic problems, finding each field's line in the
// YAML tree so that errors point at the right place.
type validator struct {
	r    *Recipe
	t    *tree
	errs []error
}

func (v *validator) fail(p, format string, args ...any) {
	n, line := nodeOf(v.t.doc, p)
	v.errs = append(v.errs, &FieldError{File: v.t.fileOf(n, v.r.Path), Line: line, Path: p, Msg: fmt.Sprintf(format, args...)})
}

func (r *Recipe) validate(t *tree) []error {
	v := &validator{r: r, t: t}
	if r.Name == "" {
		v.fail("name", "required: give the image a name (it names the output files)")
	} else if !nameRE.MatchString(r.Name) {
		v.fail("name", "%q: use lower-case letters, digits, '.', '_' and '-'", r.Name)
	}
	if _, err := arch.Lookup(r.Arch); err != nil {
		v.fail("arch", "%q: supported are %s", r.Arch, strings.Join(arch.Names(), " and "))
	}
	if r.Epoch < 0 {
		v.fail("epoch", "must be a Unix time in seconds")
	}
	v.suites()
	for i, c := range r.Debian.Components {
		if !nameRE.MatchString(c) {
			v.fail(fmt.Sprintf("debian.components[%d]", i), "%q is not a Debian archive component", c)
		}
	}
	seen := map[string]bool{}
	for i, p := range r.Packages {
		f := fmt.Sprintf("packages[%d]", i)
		if !pkgRE.MatchString(p) {
			v.fail(f, "%q is not a Debian package name (name or name=version)", p)
		}
		if seen[p] {
			v.fail(f, "%q is listed twice", p)
		}
		seen[p] = true
	}
	// An unknown arch has no default kernel; the arch error says it all.
	if _, err := arch.Lookup(r.Arch); !pkgRE.MatchString(r.Kernel) && (r.Kernel != "" || err == nil) {
		v.fail("kernel", "%q is not a Debian package name", r.Kernel)
	}
	for _, p := range slices.Sorted(maps.Keys(r.Prefer)) {
		if pkg := r.Prefer[p]; !path.IsAbs(p) || !pkgRE.MatchString(pkg) {
			v.fail("prefer."+p, "want an absolute path mapped to the package whose copy wins")
		}
	}
	v.goComponents()
	v.urlComponents()
	v.files()
	v.units()
	v.cmdline()
	v.image()
	v.sandbox()
	v.credentialProviders()
	v.secureBoot()
	v.cni()
	v.images()
	v.exclude()
	v.remove()
	return v.errs
}

func (v *validator) goComponents() {
	names := map[string]bool{}
	for i, g := range v.r.Go {
		f := fmt.Sprintf("go[%d]", i)
		if g.Name == "" || !nameRE.MatchString(g.Name) || names[g.Name] {
			v.fail(f+".name", "required and unique: a short name such as kubelet")
		}
		names[g.Name] = true
		if g.Module == "" {
			v.fail(f+".module", "required: the Go module path, e.g. k8s.io/kubernetes")
		}
		if !strings.HasPrefix(g.Version, "v") {
			v.fail(f+".version", "required: an exact module version such as v1.36.3 (no 'latest')")
		}
		if g.Package == "" {
			v.fail(f+".package", "required: the main package to build, e.g. k8s.io/kubernetes/cmd/kubelet")
		} else if g.Package != g.Module && !strings.HasPrefix(g.Package, g.Module+"/") {
			v.fail(f+".package", "%q is not inside module %q", g.Package, g.Module)
		}
		if !path.IsAbs(g.Install) {
			v.fail(f+".install", "required: the absolute path to install the binary at, e.g. /usr/bin/kubelet")
		}
		if g.Release != "" {
			if mod := gomod.ReleaseModule(g.Release); mod == "" {
				v.fail(f+".release", "%q: the release presets are kubernetes and containerd", g.Release)
			} else if g.Module != mod {
				v.fail(f+".release", "release: %s builds %s, not %q; drop release or fix module", g.Release, mod, g.Module)
			} else if _, err := gomod.ReleaseLdflags(g.Release, g.Version); err != nil {
				v.fail(f+".version", "release: %s needs a release version: %v", g.Release, err)
			}
			if g.Release == "kubernetes" && len(g.Replace) > 0 {
				v.fail(f+".replace", "release: kubernetes derives the staging replaces from the version; remove the list")
			}
		}
		for j, rep := range g.Replace {
			if !replaceRE.MatchString(rep) {
				v.fail(fmt.Sprintf("%s.replace[%d]", f, j), "%q: write it as in go.mod: 'old => new version'", rep)
			}
		}
	}
}

func (v *validator) urlComponents() {
	for i, u := range v.r.URLs {
		f := fmt.Sprintf("urls[%d]", i)
		if u.Name == "" || !nameRE.MatchString(u.Name) {
			v.fail(f+".name", "required: a short name for the component")
		}
		pu, err := url.Parse(u.URL)
		if err != nil || (pu.Scheme != "https" && pu.Scheme != "http") || pu.Host == "" {
			v.fail(f+".url", "%q: want an https URL", u.URL)
		}
		if !sha256RE.MatchString(u.SHA256) {
			v.fail(f+".sha256", "required: the 64 lower-case hex digits of the file's sha256")
		}
		if !path.IsAbs(u.Install) {
			v.fail(f+".install", "required: the absolute path to install the file at")
		}
		if u.Mode > 0o7777 {
			v.fail(f+".mode", "%#o is not a file mode", u.Mode)
		}
	}
}

func (v *validator) files() {
	for i, fl := range v.r.Files {
		f := fmt.Sprintf("files[%d]", i)
		if !path.IsAbs(fl.Path) || path.Clean(fl.Path) != fl.Path {
			v.fail(f+".path", "%q: want a clean absolute path", fl.Path)
		}
		if (fl.Content == "") == (fl.Source == "") {
			v.fail(f, "give exactly one of content (inline) or source (a file beside the recipe)")
		}
		if fl.Source != "" && (path.IsAbs(fl.Source) || strings.HasPrefix(path.Clean(fl.Source), "..")) {
			v.fail(f+".source", "%q: want a path relative to the recipe's directory, inside it", fl.Source)
		}
		if fl.Mode > 0o7777 {
			v.fail(f+".mode", "%#o is not a file mode", fl.Mode)
		}
	}
}

func (v *validator) units() {
	// A slice, not a map: the problems come out in the same order every run.
	for _, l := range []struct {
		field string
		units []string
	}{{"enable", v.r.Units.Enable}, {"disable", v.r.Units.Disable}, {"mask", v.r.Units.Mask}} {
		for i, u := range l.units {
			if !unitRE.MatchString(u) {
				v.fail(fmt.Sprintf("units.%s[%d]", l.field, i), "%q is not a systemd unit name", u)
			}
		}
	}
}

// builderCmdline are the kernel parameters the recipe may not set: drover
// sets systemd.import_credentials=no itself, after the recipe's words, and
// with it systemd ignores credentials set on the command line.
var builderCmdline = map[string]string{
	"systemd.import_credentials":    "drover sets systemd.import_credentials=no itself: system credentials come from SMBIOS and fw_cfg, which the hypervisor sets; remove it",
	"systemd.set_credential":        "systemd.import_credentials=no, which drover sets, makes systemd ignore it; put the file in files: instead",
	"systemd.set_credential_binary": "systemd.import_credentials=no, which drover sets, makes systemd ignore it; put the file in files: instead",
}

func (v *validator) cmdline() {
	for i, w := range v.r.Cmdline {
		// systemd reads rd.systemd.* in the initrd too, and takes - for _.
		key, _, _ := strings.Cut(w, "=")
		key = strings.ReplaceAll(strings.TrimPrefix(key, "rd."), "-", "_")
		if why, ok := builderCmdline[key]; ok {
			v.fail(fmt.Sprintf("cmdline[%d]", i), "%q: %s", w, why)
		}
	}
}

func (v *validator) sandbox() {
	if d := v.r.Sandbox.Digest; d != "" && !sandboxDigest.MatchString(d) {
		v.fail("sandbox.digest", "%q is not an image index digest: want sha256: and 64 lowercase hex digits, as `drover build` prints it", d)
	}
}

// cni checks cni.plugins' names; whether the image's packages offer them
// is known only once they are unpacked (image/build). It records where
// each was written for those errors.
func (v *validator) cni() {
	seen := map[string]bool{}
	plugins, _ := v.r.CNIPlugins()
	if v.r.CNI.Plugins == nil {
		plugins = nil // the default: nothing written to check
	}
	v.r.CNI.At = make([]string, len(plugins))
	for i, p := range plugins {
		f := fmt.Sprintf("cni.plugins[%d]", i)
		n, line := nodeOf(v.t.doc, f)
		v.r.CNI.At[i] = fmt.Sprintf("%s:%d", v.t.fileOf(n, v.r.Path), line)
		switch {
		case !nameRE.MatchString(p):
			v.fail(f, "%q is not a CNI plugin name: want the name of a file in %s, such as bridge", p, CNIDir)
		case seen[p]:
			v.fail(f, "%q is listed twice", p)
		}
		seen[p] = true
	}
}

func (v *validator) credentialProviders() {
	seen := map[string]bool{}
	for i, name := range v.r.CredentialProviders {
		f := fmt.Sprintf("credentialProviders[%d]", i)
		switch {
		case !slices.Contains(CredentialProviderNames(), name):
			v.fail(f, "%q is not a credential provider drover ships; known: %s", name, strings.Join(CredentialProviderNames(), ", "))
		case seen[name]:
			v.fail(f, "%q is listed twice", name)
		}
		seen[name] = true
	}
}

var sandboxDigest = regexp.MustCompile(`^sha256:[0-9a-f]{64}$`)

func (v *validator) secureBoot() {
	const f = "secureBoot.sbatGeneration"
	// A recipe without the field decodes to 0, which applyDefaults makes
	// 1; written out, 0 is a mistake (generations start at 1).
	if n := mappingValue(v.t.doc, "secureBoot", "sbatGeneration"); n != nil && isZero(deref(n)) {
		v.fail(f, "0: SBAT generations start at 1 (leave the field out for 1)")
	}
	if g := v.r.SecureBoot.SBATGeneration; g > MaxSBATGeneration {
		v.fail(f, "%d: at most %d (shim reads a generation as a C int)", g, MaxSBATGeneration)
	}
}

func (v *validator) image() {
	if v.r.Image.Size != "" {
		if _, err := ParseSize(v.r.Image.Size); err != nil {
			v.fail("image.size", "%v", err)
		}
	}
	if _, err := ParseSize(v.r.Image.ESPSize); err != nil {
		v.fail("image.espSize", "%v", err)
	}
	for i, f := range v.r.Image.Formats {
		if f != "raw" && f != "qcow2" && f != "vhd" {
			v.fail(fmt.Sprintf("image.formats[%d]", i), "%q: supported formats are raw, qcow2 and vhd", f)
		}
	}
	if c := v.r.Image.RootFS.Compression; !slices.Contains(Compressions, c) {
		v.fail("image.rootfs.compression", "%q: supported are %s", c, strings.Join(Compressions, ", "))
	}
	if n, err := ParseSize(v.r.Image.RootFS.ExtentSize); err != nil {
		v.fail("image.rootfs.extentSize", "%v", err)
	} else if n < MinExtentSize || n > MaxExtentSize || n&(n-1) != 0 {
		v.fail("image.rootfs.extentSize", "%q: want a power of two from 8KiB to 1MiB (the kernel's largest compressed cluster)", v.r.Image.RootFS.ExtentSize)
	}
}

// ParseSize reads sizes such as 512MiB or 2GiB.
func ParseSize(s string) (int64, error) {
	m := sizeRE.FindStringSubmatch(s)
	if m == nil {
		return 0, fmt.Errorf("%q: want a size such as 64MiB or 2GiB", s)
	}
	n, err := strconv.ParseInt(m[1], 10, 64)
	if err != nil {
		return 0, fmt.Errorf("%q: %w", s, err)
	}
	shift := map[string]uint{"B": 0, "KiB": 10, "MiB": 20, "GiB": 30}[m[2]]
	if n > math.MaxInt64>>shift {
		return 0, fmt.Errorf("%q: too large", s) // n << shift would wrap
	}
	return n << shift, nil
}

// isZero: n is a whole number the decoder reads as 0 (0, 00, 0x0, 0_0).
func isZero(n *yaml.Node) bool {
	i, err := strconv.ParseInt(strings.ReplaceAll(n.Value, "_", ""), 0, 64)
	return n.Kind == yaml.ScalarNode && n.Tag == "!!int" && err == nil && i == 0
}

// mappingValue returns the value node at keys in doc's mappings, or nil
// when a key is not there.
func mappingValue(doc *yaml.Node, keys ...string) *yaml.Node {
	n := doc
	if n.Kind == yaml.DocumentNode && len(n.Content) > 0 {
		n = n.Content[0]
	}
	for _, k := range keys {
		var next *yaml.Node
		for i := 0; n.Kind == yaml.MappingNode && i+1 < len(n.Content); i += 2 {
			if n.Content[i].Value == k {
				next = deref(n.Content[i+1])
			}
		}
		if next == nil {
			return nil
		}
		n = next
	}
	return n
}

// nodeOf finds the node and line of a field path like "go[1].replace[0]" in
// the YAML tree; it falls back to the nearest enclosing node that exists.
// The line is a mapping key's for a field, so the node returned is the key.
func nodeOf(doc *yaml.Node, p string) (*yaml.Node, int) {
	n := doc
	if n.Kind == yaml.DocumentNode && len(n.Content) > 0 {
		n = n.Content[0]
	}
	at, line := n, n.Line
	for _, part := range splitPath(p) {
		var next *yaml.Node
		if idx, err := strconv.Atoi(part); err == nil && n.Kind == yaml.SequenceNode {
			if idx < len(n.Content) {
				next = n.Content[idx]
				at, line = next, next.Line
			}
		} else if n.Kind == yaml.MappingNode {
			for i := 0; i+1 < len(n.Content); i += 2 {
				if n.Content[i].Value == part {
					next = n.Content[i+1]
					at, line = n.Content[i], n.Content[i].Line // the key's line, also for lists and maps
					break
				}
			}
		}
		if next == nil {
			break
		}
		n = next
	}
	return at, line
}

func splitPath(p string) []string {
	p = strings.ReplaceAll(p, "[", ".")
	p = strings.ReplaceAll(p, "]", "")
	if p == "" {
		return nil
	}
	return strings.Split(p, ".")
}

func (v *validator) exclude() {
	kept := map[string]bool{v.r.Kernel: true}
	for _, p := range v.r.Packages {
		kept[strings.SplitN(p, "=", 2)[0]] = true
	}
	seen := map[string]bool{}
	for i, e := range v.r.Exclude {
		f := fmt.Sprintf("exclude[%d]", i)
		switch {
		case !pkgRE.MatchString(e.Package) || strings.Contains(e.Package, "="):
			v.fail(f+".package", "%q: want the name of a Debian package of the closure (no version)", e.Package)
		case kept[e.Package]:
			v.fail(f+".package", "%q is also asked for by packages or kernel: drop one of the two", e.Package)
		case seen[e.Package]:
			v.fail(f+".package", "%q is excluded twice", e.Package)
		}
		seen[e.Package] = true
		if strings.TrimSpace(e.Why) == "" {
			v.fail(f+".why", "required: say why the node does not need %s", e.Package)
		}
	}
}

func (v *validator) remove() {
	seen := map[string]bool{}
	for i, rm := range v.r.Remove {
		f := fmt.Sprintf("remove[%d]", i)
		_, err := path.Match(rm.Glob, "/")
		switch {
		case !path.IsAbs(rm.Glob) || path.Clean(rm.Glob) != rm.Glob || rm.Glob == "/":
			v.fail(f+".glob", "%q: want a clean absolute path or glob below /", rm.Glob)
		case err != nil:
			v.fail(f+".glob", "%q: %v (path.Match syntax: *, ?, [...])", rm.Glob, err)
		case seen[rm.Glob]:
			v.fail(f+".glob", "%q is listed twice", rm.Glob)
		}
		seen[rm.Glob] = true
		if _, err := arch.Lookup(rm.Arch); rm.Arch != "" && err != nil {
			v.fail(f+".arch", "%q: supported are %s (or leave it out: every architecture)", rm.Arch, strings.Join(arch.Names(), " and "))
		}
		if strings.TrimSpace(rm.Why) == "" {
			v.fail(f+".why", "required: say why the node does not need %s", rm.Glob)
		}
	}
}

// suiteSuffixes are the suites of a release besides the release itself.
var suiteSuffixes = []string{"-updates", "-security", "-proposed-updates", "-backports"}

// suites checks debian.suites: suite names, each once, all of the release
// the first names (trixie-security with bookworm would mix two releases'
// libraries in one closure).
func (v *validator) suites() {
	d := v.r.Debian
	if d.Suite != "" && len(d.Suites) > 0 {
		v.fail("debian.suite", "give debian.suites or debian.suite, not both (suite: X is suites: [X])")
		return
	}
	release := d.Release()
	for _, s := range suiteSuffixes {
		if strings.HasSuffix(release, s) {
			v.fail("debian.suites[0]", "%q: the first suite is the release itself (e.g. trixie), the others its updates (trixie-updates, trixie-security)", release)
			return
		}
	}
	seen := map[string]bool{}
	for i, s := range d.Suites {
		f := fmt.Sprintf("debian.suites[%d]", i)
		switch {
		case !nameRE.MatchString(s):
			v.fail(f, "%q is not a Debian suite name", s)
		case seen[s]:
			v.fail(f, "%q is listed twice", s)
		case i > 0 && !slices.ContainsFunc(suiteSuffixes, func(x string) bool { return s == release+x }):
			v.fail(f, "%q is not a suite of release %s (the first suite): want one of %s", s, release, strings.Join(suitesOf(release), ", "))
		}
		seen[s] = true
	}
}

func suitesOf(release string) []string {
	var out []string
	for _, s := range suiteSuffixes {
		out = append(out, release+s)
	}
	return out
}
