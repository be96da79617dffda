// Package recipe reads drover image recipes: the declarative list of what a
// node image contains (Debian packages, Go components, URL components, files,
// units, kernel command line, image options). Parsing is strict: unknown
// fields, wrong types and invalid values are errors naming file, line and
// field path. See docs/recipes.md for the format.
package recipe

import (
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"reflect"

	"github.com/drover-os/drover/image/arch"
)

// Recipe is one image recipe as written by the user, with defaults applied.
type Recipe struct {
	// Extends names the base recipe this one overlays (a file beside it);
	// the fields below are the merged result (extends.go).
	Extends  string            `yaml:"extends,omitempty"`
	Name     string            `yaml:"name"`
	Arch     string            `yaml:"arch"`
	Epoch    int64             `yaml:"epoch"`
	Debian   Debian            `yaml:"debian"`
	Kernel   string            `yaml:"kernel"`
	Packages []string          `yaml:"packages"`
	Prefer   map[string]string `yaml:"prefer"`
	Go       []GoComponent     `yaml:"go"`
	URLs     []URLComponent    `yaml:"urls"`
	Files    []File            `yaml:"files"`
	Units    Units             `yaml:"units"`
	Cmdline  []string          `yaml:"cmdline"`
	Image    Image             `yaml:"image"`
	Sandbox  Sandbox           `yaml:"sandbox"`
	// CredentialProviders are the kubelet image credential providers of
	// drover's the image ships, by name (CredentialProviderNames): drover
	// build compiles each from the checkout like drover-agent, and the
	// agent configures the kubelet to use what the image has.
	CredentialProviders []string `yaml:"credentialProviders"`
	// SecureBoot holds what the recipe says about its UKI for Secure Boot
	// (the signing key itself is the build's --secure-boot-key).
	SecureBoot SecureBoot `yaml:"secureBoot"`
	CNI        CNI        `yaml:"cni"`
	// Images are the workload images the node ships in its image cache
	// (images.go).
	Images []CachedImage `yaml:"images"`
	// Exclude keeps packages of the dependency closure out of the image;
	// Remove deletes paths after installation. See docs/recipes.md.
	Exclude []Exclude `yaml:"exclude"`
	Remove  []Remove  `yaml:"remove"`

	// Path is the file the recipe was read from; Dir is its directory,
	// against which files' sources are resolved. Raw is the file's bytes.
	// Sources are Path and every base it extends, overlay first.
	Path    string   `yaml:"-"`
	Dir     string   `yaml:"-"`
	Raw     []byte   `yaml:"-"`
	Sources []Source `yaml:"-"`
}

// Debian selects the Debian suites the packages come from.
type Debian struct {
	// Suites are the suites a Debian system of the release would use, e.g.
	// trixie, trixie-updates and trixie-security: the lock takes each
	// package's highest version among them, as apt does at equal priority.
	// The first is the release itself. Suite is the one-suite shorthand.
	Suites     []string `yaml:"suites"`
	Suite      string   `yaml:"suite"`
	Components []string `yaml:"components"`
	// Keyring is the OpenPGP keyring InRelease must verify against; empty
	// means the keys committed in recipes/keys for the suite (or --keyring).
	Keyring string `yaml:"keyring"`
}

// GoComponent is a Go program built from the Go module proxy.
type GoComponent struct {
	Name    string   `yaml:"name"`
	Module  string   `yaml:"module"`
	Version string   `yaml:"version"`
	Package string   `yaml:"package"`
	Install string   `yaml:"install"`
	Replace []string `yaml:"replace"`
	Ldflags []string `yaml:"ldflags"`
	Tags    []string `yaml:"tags"`
	// Release builds the component like its project's release of Version:
	// "kubernetes" derives the version ldflags and the staging replaces (at
	// lock time, from the module's go.mod), "containerd" the version
	// ldflags (gomod.ReleaseLdflags).
	Release string `yaml:"release"`
	// Line and From are where the component was written (From is the
	// recipe file: an overlay's or its base's).
	Line int    `yaml:"-"`
	From string `yaml:"-"`
}

// URLComponent is a file fetched over https and pinned by sha256, installed
// as is or taken out of a tar archive.
type URLComponent struct {
	Name    string `yaml:"name"`
	URL     string `yaml:"url"`
	SHA256  string `yaml:"sha256"`
	Install string `yaml:"install"`
	Mode    uint32 `yaml:"mode"`
	Member  string `yaml:"member"`
	Line    int    `yaml:"-"`
	From    string `yaml:"-"`
}

// File is a file the recipe adds to the image, inline or from the repository.
type File struct {
	Path    string `yaml:"path"`
	Mode    uint32 `yaml:"mode"`
	Content string `yaml:"content"`
	Source  string `yaml:"source"`
	Line    int    `yaml:"-"`
	From    string `yaml:"-"`
}

// Units lists systemd units to enable, disable or mask at build time.
type Units struct {
	Enable  []string `yaml:"enable"`
	Disable []string `yaml:"disable"`
	Mask    []string `yaml:"mask"`
}

// Image holds output options.
type Image struct {
	// Size is the disk image size (e.g. "2GiB"); the var partition is not
	// in the image, it is created on first boot over the rest of the disk.
	Size    string   `yaml:"size"`
	ESPSize string   `yaml:"espSize"`
	Formats []string `yaml:"formats"`
	RootFS  RootFS   `yaml:"rootfs"`
}

// RootFS holds how the root filesystem is written.
type RootFS struct {
	// Compression of regular files: none, lz4, lz4hc or zstd (one of
	// Compressions; docs/recipes.md weighs them).
	Compression string `yaml:"compression"`
	// ExtentSize is how much of a file one compressed block cluster holds
	// (a power of two from 8KiB to 1MiB): larger compresses better, and a
	// read of any byte decompresses the whole extent.
	ExtentSize string `yaml:"extentSize"`
}

// The bounds of image.rootfs.extentSize: two blocks, and the kernel's
// largest pcluster (Z_EROFS_PCLUSTER_MAX_SIZE); image/erofsz checks the same.
const (
	MinExtentSize = 8 << 10
	MaxExtentSize = 1 << 20
)

// Compressions are the root filesystem compressions a recipe may name.
var Compressions = []string{"none", "lz4", "lz4hc", "zstd"}

// Sandbox is the pod sandbox ("pause") image a node image ships: drover
// build makes it from cmd/drover-pause (linux/amd64 and linux/arm64, one
// OCI index) with the lock's Go toolchain, and fails when its index digest
// is not Digest. The digest moves only when the pause program or the
// toolchain does, so a change shows up in review as a change of this line.
// Empty: the image ships none (an image without a container runtime).
type Sandbox struct {
	Digest string `yaml:"digest"`
}

// CredentialProviderNames are the values credentialProviders may list:
// "acr", cmd/drover-acr-credential-provider (private Alibaba Cloud
// Container Registry images pulled with the instance's RAM role).
func CredentialProviderNames() []string { return []string{"acr"} }

// SecureBoot is the recipe's part of Secure Boot.
type SecureBoot struct {
	// SBATGeneration is the generation of the UKI's SBAT entry for
	// component "drover" (shim's SBAT.md). Raise it when UKIs built before
	// must stop booting where SBAT is enforced (shim with an SbatLevel
	// naming drover,N): docs/security.md, "Revoking old UKIs". Default 1.
	SBATGeneration uint32 `yaml:"sbatGeneration"`
}

// CNI chooses which of the CNI plugins the image's packages install in
// CNIDir (Debian's containernetworking-plugins: sixteen, 56 MB) ship: a
// cluster's network add-on uses a few, and the rest is code on every node
// that nothing runs. Like remove, it acts on files, not on what the lock
// resolves, so it is not part of InputsDigest.
type CNI struct {
	// Plugins are the plugins shipped, by file name. nil (the field left
	// out, or null) means DefaultCNIPlugins; an empty list ships none. A
	// pointer, so that a recipe written back out keeps the difference.
	Plugins *[]string `yaml:"plugins,omitempty"`
	// At is where each plugin was written ("file:line"), for the build's
	// errors; Line and From are the cni mapping's.
	At   []string `yaml:"-"`
	Line int      `yaml:"-"`
	From string   `yaml:"-"`
}

// CNIDir is where Debian's containernetworking-plugins installs the
// plugins, and containerd's CNI bin_dirs on a node (agent/nodeconfig).
const CNIDir = "/usr/lib/cni"

// DefaultCNIPlugins are the plugins a recipe that does not say ships: what
// the documented setups run. The smoke test's network and flannel's
// (its own flannel plugin delegates to bridge with host-local IPAM, and
// its conflist chains portmap) need bridge, host-local and portmap;
// loopback is what containerd's CRI sets up every pod's lo with. Terway
// and flannel install their own plugin themselves.
func DefaultCNIPlugins() []string { return []string{"bridge", "host-local", "loopback", "portmap"} }

// CNIPlugins are the plugins the image ships, and whether the recipe named
// them (cni.plugins) or they are the default.
func (r *Recipe) CNIPlugins() (plugins []string, named bool) {
	if r.CNI.Plugins == nil {
		return DefaultCNIPlugins(), false
	}
	return *r.CNI.Plugins, true
}

// Exclude is a package the closure drags in that the image leaves out. The
// lock still pins it (the build reads it to know what it ships, so that it
// can check nothing installed needs it); its files are not installed.
type Exclude struct {
	Package string `yaml:"package"`
	Why     string `yaml:"why"`
	Line    int    `yaml:"-"`
}

// Remove deletes every path matching Glob (path.Match syntax per path, a
// directory with everything under it) after installation, before finalize.
type Remove struct {
	Glob string `yaml:"glob"`
	Why  string `yaml:"why"`
	// Arch, when set, limits the entry to images of that architecture:
	// a base recipe's paths that only one architecture's packages install
	// (amd64's kernel has module trees arm64's lacks), since an entry that
	// matches nothing fails the build.
	Arch string `yaml:"arch"`
	Line int    `yaml:"-"`
}

// Applies says whether the entry acts on an image of architecture a.
func (rm Remove) Applies(a string) bool { return rm.Arch == "" || rm.Arch == a }

// Defaults applied when a field is left out.
const (
	DefaultSuite   = "trixie"
	DefaultArch    = "amd64"
	DefaultESPSize = "64MiB"
	// DefaultSBATGeneration is the first generation of the UKI's SBAT
	// entry.
	DefaultSBATGeneration = 1
	// MaxSBATGeneration: shim reads a generation as a C int.
	MaxSBATGeneration = 1<<31 - 1
	// DefaultCompression keeps the root uncompressed, as every image
	// before the option was.
	DefaultCompression = "none"
	// DefaultExtentSize is the extent of a compressed root: the smallest
	// cost of a random read that still compresses (docs/recipes.md).
	DefaultExtentSize = "64KiB"
)

// DefaultSuites are the suites of a recipe that names none: the release,
// its stable updates and its security updates.
func DefaultSuites() []string {
	return []string{DefaultSuite, DefaultSuite + "-updates", DefaultSuite + "-security"}
}

// Release is the Debian release the recipe's suites belong to: its first
// suite (trixie).
func (d Debian) Release() string {
	if len(d.Suites) == 0 {
		return d.Suite
	}
	return d.Suites[0]
}

// Load reads and validates the recipe at path.
func Load(path string) (*Recipe, error) {
	data, err := os.ReadFile(path)
	if err != nil {
		return nil, fmt.Errorf("reading recipe: %w", err)
	}
	return Parse(path, data)
}

// Parse decodes and validates a recipe; path is used in error messages and
// to resolve files' sources. All problems are reported together.
//
// A recipe that extends another is read with its base (from the same
// directory) and merged first; see extends.go.
func Parse(path string, data []byte) (*Recipe, error) {
	t, err := loadTree(path, data, nil)
	if err != nil {
		return nil, err
	}
	r := &Recipe{Path: path, Dir: filepath.Dir(path), Raw: data, Sources: t.sources}
	d := &decoder{file: path, tree: t}
	d.decode(t.doc, reflect.ValueOf(r).Elem(), "")
	if len(d.errs) > 0 {
		return nil, errors.Join(d.errs...)
	}
	r.applyDefaults()
	if errs := r.validate(t); len(errs) > 0 {
		return nil, errors.Join(errs...)
	}
	return r, nil
}

func (r *Recipe) applyDefaults() {
	if r.Arch == "" {
		r.Arch = DefaultArch
	}
	switch {
	case len(r.Debian.Suites) > 0:
		// with suite: too, validate says to pick one
	case r.Debian.Suite != "":
		r.Debian.Suites, r.Debian.Suite = []string{r.Debian.Suite}, ""
	default:
		r.Debian.Suites = DefaultSuites()
	}
	if len(r.Debian.Components) == 0 {
		r.Debian.Components = []string{"main"}
	}
	if r.Kernel == "" {
		// An unknown arch fails validation; its kernel stays empty.
		if a, err := arch.Lookup(r.Arch); err == nil {
			r.Kernel = a.Kernel
		}
	}
	if r.Image.ESPSize == "" {
		r.Image.ESPSize = DefaultESPSize
	}
	if len(r.Image.Formats) == 0 {
		r.Image.Formats = []string{"raw"}
	}
	if r.SecureBoot.SBATGeneration == 0 {
		r.SecureBoot.SBATGeneration = DefaultSBATGeneration
	}
	if r.Image.RootFS.Compression == "" {
		r.Image.RootFS.Compression = DefaultCompression
	}
	if r.Image.RootFS.ExtentSize == "" {
		r.Image.RootFS.ExtentSize = DefaultExtentSize
	}
	for i := range r.URLs {
		if r.URLs[i].Mode == 0 {
			r.URLs[i].Mode = 0o755
		}
	}
	for i := range r.Images {
		if r.Images[i].Location == "" {
			r.Images[i].Location = LocationRoot
		}
	}
	for i := range r.Files {
		if r.Files[i].Mode == 0 {
			r.Files[i].Mode = 0o644
		}
	}
}

// Roots are the Debian packages the recipe asks for directly: its packages
// and its kernel. A recipe read from a file always has a kernel (the
// arch's default); a package set made in code, such as a conformance test
// image's (harness/conformance), has none.
func (r *Recipe) Roots() []string {
	roots := append([]string(nil), r.Packages...)
	if r.Kernel != "" {
		roots = append(roots, r.Kernel)
	}
	return roots
}

// InputsDigest is the sha256 of everything in the recipe that decides what
// the lock resolves: arch, suites, components, keyring, packages, kernel, Go
// and URL components, cached images (reference and platform). A lock records it; a different digest means the lock
// is stale. Files, units, cmdline and image options do not need a re-lock.
func (r *Recipe) InputsDigest() string {
	type goIn struct {
		Module, Version, Package string
		Replace, Ldflags, Tags   []string
		Release                  string `json:",omitempty"`
	}
	type urlIn struct{ URL, SHA256 string }
	// Where an image ships is not resolved: only what is fetched.
	type imageIn struct{ Ref, Platform string }
	in := struct {
		Arch, Kernel string
		Suites       []string
		Components   []string
		Packages     []string
		Go           []goIn
		URLs         []urlIn
		Images       []imageIn `json:",omitempty"`
	}{Arch: r.Arch, Suites: r.Debian.Suites, Kernel: r.Kernel, Components: r.Debian.Components, Packages: r.Packages}
	for _, g := range r.Go {
		in.Go = append(in.Go, goIn{g.Module, g.Version, g.Package, g.Replace, g.Ldflags, g.Tags, g.Release})
	}
	for _, u := range r.URLs {
		in.URLs = append(in.URLs, urlIn{u.URL, u.SHA256})
	}
	for _, im := range r.Images {
		in.Images = append(in.Images, imageIn{im.Ref, r.ImagePlatform(im)})
	}
	b, _ := json.Marshal(in) // plain structs of strings: cannot fail
	sum := sha256.Sum256(b)
	return hex.EncodeToString(sum[:])
}

// Digest is the sha256 of the recipe file as written; for an overlay, of
// the overlay and its bases: the sha256 of one "sha256 path" line per file,
// overlay first, so that a change to a base changes it too.
func (r *Recipe) Digest() string {
	if len(r.Sources) <= 1 {
		sum := sha256.Sum256(r.Raw)
		return hex.EncodeToString(sum[:])
	}
	h := sha256.New()
	for _, s := range r.Sources {
		sum := sha256.Sum256(s.Raw)
		fmt.Fprintf(h, "%x %s\n", sum, filepath.Base(s.Path))
	}
	return hex.EncodeToString(h.Sum(nil))
}

// GoComponent returns the Go component called name, or nil.
func (r *Recipe) GoComponent(name string) *GoComponent {
	for i := range r.Go {
		if r.Go[i].Name == name {
			return &r.Go[i]
		}
	}
	return nil
}

// LockPath is where the lock for this recipe lives: beside it.
func (r *Recipe) LockPath() string { return r.Path + ".lock" }
