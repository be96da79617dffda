// Package lock reads and writes recipe lock files: the reviewable, sorted,
// line-oriented record of every input an image is built from, each pinned by
// sha256. One line per item, so that a version bump is a one-line diff in a
// merge request.
//
//	lock 1
//	inputs <sha256 of the recipe's resolution inputs>
//	epoch <unix seconds> <RFC 3339>
//	toolchain <Go toolchain every Go binary of the image is built with, e.g. go1.26.8>
//	suite <name> <Release date RFC 3339> <InRelease sha256>
//	signer <suite> <fingerprint of the key that signed it> <trust root>
//	deb <name> <version> <arch> <size> <sha256> <suite> <archive path>
//	go <name> <module>@<version> <package> <toolchain>
//	gomod <name> <go.mod line>
//	gosum <name> <go.sum line>
//	url <name> <sha256> <size> <url>
//	image <host/repo[:tag]@digest> <platform> <platform manifest digest> <bytes>
package lock

import (
	"bufio"
	"bytes"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"sort"
	"strconv"
	"strings"
	"time"
	"unicode"

	"github.com/drover-os/drover/internal/atomicfile"
)

// Version is the lock format version this builder writes and reads.
// Version 2 added the suite to each deb line: a recipe takes several
// suites, and a -security suite's pool is on another archive.
const Version = 2

// Lock is a parsed lock file.
type Lock struct {
	Inputs string
	Epoch  int64
	// Toolchain is the Go toolchain (go1.X.Y) the Go components and
	// drover's own binaries are built with; the build runs exactly it.
	Toolchain string
	Suites    []Suite
	Debs      []Deb
	Go        []Go
	URLs      []URL
	Images    []Image
}

// Image pins one cached workload image: the recipe's reference (whose
// digest is an index's or a manifest's), the platform taken of an index,
// and that platform's manifest digest, which pins its config and layers;
// Size is the manifest, config and layers together, what the node ships.
type Image struct {
	Ref, Platform, Manifest string
	Size                    int64
}

// Suite pins one signed Debian Release.
type Suite struct {
	Name      string
	Date      time.Time
	InRelease string
	// Signer is the fingerprint (hex, upper case) of the primary key whose
	// signature on the InRelease verified; Trust names the keys it was
	// checked against (see sources.TrustRoot): "repo:recipes/keys/…" for the
	// keys committed in drover's repository, "recipe:<path>" for a keyring
	// the recipe names, "override:sha256:<hex>" for --keyring.
	Signer, Trust string
}

// Deb pins one Debian package.
type Deb struct {
	Name, Version, Arch string
	Size                int64
	SHA256              string
	// Suite is the recipe's suite whose signed index lists the package;
	// it names the archive the path is relative to (a -security suite's
	// pool is on the security archive, not the main mirror).
	Suite string
	Path  string
	// Line is the deb line's number in the lock file Parse read it from
	// (0 for a lock made in memory), for errors that name the line.
	Line int
}

// FileName is the package's file name in the archive pool.
func (d Deb) FileName() string { return filepath.Base(d.Path) }

// Go pins one Go component: its module version and the exact module graph
// (go.mod and go.sum lines) it is built from.
type Go struct {
	Name, Module, Version, Package, Toolchain string
	GoMod                                     []string
	Sum                                       []string
}

// URL pins one file fetched over https.
type URL struct {
	Name, SHA256, URL string
	Size              int64
}

// Format renders the lock as sorted, stable text.
func (l *Lock) Format(header string) []byte {
	var b bytes.Buffer
	for _, h := range strings.Split(strings.TrimSpace(header), "\n") {
		if h != "" {
			fmt.Fprintf(&b, "# %s\n", h)
		}
	}
	fmt.Fprintf(&b, "lock %d\n", Version)
	fmt.Fprintf(&b, "inputs %s\n", l.Inputs)
	fmt.Fprintf(&b, "epoch %d %s\n", l.Epoch, time.Unix(l.Epoch, 0).UTC().Format(time.RFC3339))
	if l.Toolchain != "" {
		fmt.Fprintf(&b, "toolchain %s\n", l.Toolchain)
	}
	suites := append([]Suite(nil), l.Suites...)
	sort.Slice(suites, func(i, j int) bool { return suites[i].Name < suites[j].Name })
	for _, s := range suites {
		fmt.Fprintf(&b, "suite %s %s %s\n", s.Name, s.Date.UTC().Format(time.RFC3339), s.InRelease)
		if s.Signer != "" {
			fmt.Fprintf(&b, "signer %s %s %s\n", s.Name, s.Signer, s.Trust)
		}
	}
	debs := append([]Deb(nil), l.Debs...)
	sort.Slice(debs, func(i, j int) bool {
		if debs[i].Name != debs[j].Name {
			return debs[i].Name < debs[j].Name
		}
		return debs[i].Arch < debs[j].Arch
	})
	for _, d := range debs {
		fmt.Fprintf(&b, "deb %s %s %s %d %s %s %s\n", d.Name, d.Version, d.Arch, d.Size, d.SHA256, d.Suite, d.Path)
	}
	gos := append([]Go(nil), l.Go...)
	sort.Slice(gos, func(i, j int) bool { return gos[i].Name < gos[j].Name })
	for _, g := range gos {
		fmt.Fprintf(&b, "go %s %s@%s %s %s\n", g.Name, g.Module, g.Version, g.Package, g.Toolchain)
		for _, m := range g.GoMod {
			fmt.Fprintf(&b, "gomod %s %s\n", g.Name, m)
		}
		sum := append([]string(nil), g.Sum...)
		sort.Strings(sum)
		for _, s := range sum {
			fmt.Fprintf(&b, "gosum %s %s\n", g.Name, s)
		}
	}
	urls := append([]URL(nil), l.URLs...)
	sort.Slice(urls, func(i, j int) bool { return urls[i].Name < urls[j].Name })
	for _, u := range urls {
		fmt.Fprintf(&b, "url %s %s %d %s\n", u.Name, u.SHA256, u.Size, u.URL)
	}
	images := append([]Image(nil), l.Images...)
	sort.Slice(images, func(i, j int) bool { return images[i].Ref < images[j].Ref })
	for _, im := range images {
		fmt.Fprintf(&b, "image %s %s %s %d\n", im.Ref, im.Platform, im.Manifest, im.Size)
	}
	return b.Bytes()
}

// Read parses the lock file at path.
func Read(path string) (*Lock, error) {
	data, err := os.ReadFile(path)
	if err != nil {
		if errors.Is(err, os.ErrNotExist) {
			return nil, &missingError{path}
		}
		return nil, fmt.Errorf("reading lock: %w", err)
	}
	return Parse(path, data)
}

// missingError says there is no lock yet and what to run; it matches
// os.ErrNotExist for callers that treat a missing lock as "none yet".
type missingError struct{ path string }

func (e *missingError) Error() string {
	return fmt.Sprintf("no lock file %s: run `drover lock %s` first", e.path, strings.TrimSuffix(e.path, ".lock"))
}

func (e *missingError) Is(target error) bool { return target == os.ErrNotExist }

// Parse reads lock text; errors name path and line.
func Parse(path string, data []byte) (*Lock, error) {
	l := &Lock{}
	gos := map[string]*Go{}
	sc := bufio.NewScanner(bytes.NewReader(data))
	sc.Buffer(make([]byte, 64*1024), 1<<20)
	n := 0
	sawVersion, format1 := false, false
	// Format writes each header line once; a lock without its inputs would
	// look stale for a reason it does not say, one without its epoch would
	// stamp the image 1970, and two of either are a botched merge.
	headerLine := map[string]int{}
	for sc.Scan() {
		n++
		line := sc.Text()
		f := strings.Fields(line)
		// A hand-edited or merged lock may carry lines of only blanks.
		if len(f) == 0 || strings.HasPrefix(line, "#") {
			continue
		}
		bad := func(format string, args ...any) error {
			return fmt.Errorf("%s:%d: %s; the lock is damaged: run `drover lock` again", path, n, fmt.Sprintf(format, args...))
		}
		want := map[string]int{"lock": 2, "inputs": 2, "epoch": 3, "toolchain": 2, "suite": 4, "signer": 4, "deb": 8, "go": 5, "url": 5, "image": 5}
		if format1 {
			want["deb"] = 7
		}
		if w, ok := want[f[0]]; ok && len(f) != w {
			return nil, bad("%q line wants %d fields, has %d", f[0], w, len(f))
		}
		if f[0] == "lock" || f[0] == "inputs" || f[0] == "epoch" {
			if first := headerLine[f[0]]; first != 0 {
				return nil, bad("%q line given twice (first on line %d)", f[0], first)
			}
			headerLine[f[0]] = n
		}
		switch f[0] {
		case "lock":
			switch f[1] {
			case strconv.Itoa(Version):
			case "1":
				// One suite, deb lines without it: still read, so that the
				// first re-lock keeps the Go pins and the toolchain.
				format1 = true
			default:
				return nil, bad("lock format %s is not supported (this drover reads %d)", f[1], Version)
			}
			sawVersion = true
		case "inputs":
			l.Inputs = f[1]
		case "epoch":
			e, err := strconv.ParseInt(f[1], 10, 64)
			if err != nil {
				return nil, bad("epoch %q is not a number", f[1])
			}
			l.Epoch = e
		case "toolchain":
			if !strings.HasPrefix(f[1], "go1.") {
				return nil, bad("toolchain %q is not a Go release (go1.X.Y)", f[1])
			}
			l.Toolchain = f[1]
		case "suite":
			t, err := time.Parse(time.RFC3339, f[2])
			if err != nil {
				return nil, bad("suite date %q: %v", f[2], err)
			}
			l.Suites = append(l.Suites, Suite{Name: f[1], Date: t, InRelease: f[3]})
		case "signer":
			i := len(l.Suites) - 1
			if i < 0 || l.Suites[i].Name != f[1] {
				return nil, bad("signer for suite %q does not follow its suite line", f[1])
			}
			if l.Suites[i].Signer != "" {
				return nil, bad("suite %q has two signer lines", f[1])
			}
			l.Suites[i].Signer, l.Suites[i].Trust = f[2], f[3]
		case "deb":
			size, err := strconv.ParseInt(f[4], 10, 64)
			if err != nil {
				return nil, bad("size %q is not a number", f[4])
			}
			if format1 {
				if len(l.Suites) != 1 {
					return nil, bad("a format 1 lock has one suite line before its deb lines")
				}
				f = slices.Insert(f, 6, l.Suites[0].Name)
			}
			l.Debs = append(l.Debs, Deb{Name: f[1], Version: f[2], Arch: f[3], Size: size, SHA256: f[5], Suite: f[6], Path: f[7], Line: n})
		case "go":
			mod, ver, ok := strings.Cut(f[2], "@")
			if !ok {
				return nil, bad("want module@version, got %q", f[2])
			}
			g := &Go{Name: f[1], Module: mod, Version: ver, Package: f[3], Toolchain: f[4]}
			if gos[g.Name] != nil {
				return nil, bad("Go component %q is locked twice", g.Name)
			}
			gos[g.Name] = g
		case "gomod", "gosum":
			if len(f) < 3 {
				return nil, bad("%q line is too short", f[0])
			}
			g := gos[f[1]]
			if g == nil {
				return nil, bad("%s for unknown Go component %q", f[0], f[1])
			}
			rest := afterFields(line, 2)
			if f[0] == "gomod" {
				g.GoMod = append(g.GoMod, rest)
			} else {
				g.Sum = append(g.Sum, rest)
			}
		case "url":
			size, err := strconv.ParseInt(f[3], 10, 64)
			if err != nil {
				return nil, bad("size %q is not a number", f[3])
			}
			l.URLs = append(l.URLs, URL{Name: f[1], SHA256: f[2], Size: size, URL: f[4]})
		case "image":
			size, err := strconv.ParseInt(f[4], 10, 64)
			if err != nil || size <= 0 {
				return nil, bad("size %q is not a positive number", f[4])
			}
			if !strings.Contains(f[1], "@sha256:") || !strings.HasPrefix(f[3], "sha256:") {
				return nil, bad("image line wants <ref>@sha256:… <platform> sha256:… <bytes>")
			}
			l.Images = append(l.Images, Image{Ref: f[1], Platform: f[2], Manifest: f[3], Size: size})
		default:
			return nil, bad("unknown line kind %q", f[0])
		}
	}
	if err := sc.Err(); err != nil {
		return nil, fmt.Errorf("reading %s: %w", path, err)
	}
	if !sawVersion {
		return nil, fmt.Errorf("%s: not a drover lock file (no `lock %d` line); run `drover lock` again", path, Version)
	}
	for _, kind := range []string{"inputs", "epoch"} {
		if headerLine[kind] == 0 {
			return nil, fmt.Errorf("%s: no %q line; the lock is damaged: run `drover lock` again", path, kind)
		}
	}
	for _, g := range gos {
		l.Go = append(l.Go, *g)
	}
	sort.Slice(l.Go, func(i, j int) bool { return l.Go[i].Name < l.Go[j].Name })
	return l, nil
}

// afterFields is line without its first n blank-separated fields (split as
// strings.Fields does, so tabs count as blanks too).
func afterFields(line string, n int) string {
	s := line
	for range n {
		s = strings.TrimLeftFunc(s, unicode.IsSpace)
		i := strings.IndexFunc(s, unicode.IsSpace)
		if i < 0 {
			return ""
		}
		s = s[i:]
	}
	return strings.TrimSpace(s)
}

// Write stores the lock atomically, so an interrupted lock never leaves a
// half-written file that a build would trust.
func Write(path string, data []byte) error {
	if err := atomicfile.Write(path, data, 0o644); err != nil {
		return fmt.Errorf("writing lock: %w", err)
	}
	return nil
}

// CheckFresh returns an error telling the user to re-lock when the lock was
// made for different recipe inputs.
func (l *Lock) CheckFresh(recipePath, inputs string) error {
	if l.Inputs != inputs {
		return fmt.Errorf("lock %s.lock does not match recipe %s (its packages, kernel, suites or components changed since it was locked): run `drover lock %s`", recipePath, recipePath, recipePath)
	}
	return nil
}

// LineChange is a line of one lock text that the other lacks, with its
// number in the text it is from.
type LineChange struct {
	Line int
	Text string
}

// Changes compares two lock texts line by line, as sets of lines, leaving
// out comments and blank lines: removed are old's lines that new lacks,
// added new's lines that old lacks, each in file order. It is what
// `drover lock --refresh` reports: a line it replaced is one removed and
// one added.
func Changes(old, new []byte) (removed, added []LineChange) {
	lines := func(data []byte) ([]LineChange, map[string]bool) {
		var out []LineChange
		set := map[string]bool{}
		for i, l := range strings.Split(string(data), "\n") {
			l = strings.TrimSpace(l)
			if l == "" || strings.HasPrefix(l, "#") {
				continue
			}
			out = append(out, LineChange{i + 1, l})
			set[l] = true
		}
		return out, set
	}
	oldLines, oldSet := lines(old)
	newLines, newSet := lines(new)
	for _, l := range oldLines {
		if !newSet[l.Text] {
			removed = append(removed, l)
		}
	}
	for _, l := range newLines {
		if !oldSet[l.Text] {
			added = append(added, l)
		}
	}
	return removed, added
}
