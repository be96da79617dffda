// Package secretscan finds a secret in files the way someone holding a
// copy of a disk would: in plain text, and inside the encodings configs
// carry — data: URLs, percent-encoded text (a URL's query, a form), base64
// runs (also line-wrapped) and gzip streams, nested. A grep for the plain secret misses a token in a base64 data: URL
// of an Ignition config, or in a gzip-compressed one.
package secretscan

import (
	"bytes"
	"encoding/base64"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path/filepath"
	"regexp"
	"strings"

	"github.com/vincent-petithory/dataurl"

	"github.com/drover-os/drover/internal/gunzip"
)

// maxDepth bounds nesting (base64 inside gzip inside a data: URL is three);
// maxInflate bounds one decompressed stream and maxInflateTotal all that
// one Find inflates, every stream at every depth: a few KB can hold
// hundreds of gzip streams of 64 MiB each.
const (
	maxDepth        = 4
	maxInflate      = 64 << 20
	maxInflateTotal = 128 << 20
)

// percentRun is a run of URL characters holding at least one percent
// escape (ASCII only, so a binary file yields short runs, not one long
// one).
var percentRun = regexp.MustCompile(`[\w.~!$&'()*+,;=:@/?#\[\]-]*(?:%[0-9A-Fa-f]{2}[\w.~!$&'()*+,;=:@/?#\[\]-]*)+`)

// base64Run is a run of base64 characters, possibly wrapped over lines
// (PEM, MIME), at least long enough to hold a short secret.
var base64Run = regexp.MustCompile(`[A-Za-z0-9+/_-][A-Za-z0-9+/_\-\r\n]{14,}[A-Za-z0-9+/_-]={0,2}`)

// Find says where secret is in data ("" if nowhere): "plain", or the chain
// of encodings it was found under, e.g. "data: URL at 120 → gzip at 0".
func Find(data, secret []byte) string {
	return FindWithin(data, secret, gunzip.NewBudget(maxInflateTotal))
}

// FindWithin is Find drawing every inflated byte from b, which the caller
// shares among its searches of one input. Once b has run out no further
// gzip stream is opened: b.Out() then tells the caller the search did not
// look everywhere.
func FindWithin(data, secret []byte, b *gunzip.Budget) string {
	if len(secret) == 0 {
		return ""
	}
	where, _ := find(data, secret, maxDepth, b)
	return where
}

func find(data, secret []byte, depth int, b *gunzip.Budget) (string, bool) {
	if bytes.Contains(data, secret) {
		return "plain", true
	}
	if depth == 0 {
		return "", false
	}
	// data: URLs (base64 or percent-encoded).
	for off := 0; ; {
		i := bytes.Index(data[off:], []byte("data:"))
		if i < 0 {
			break
		}
		start := off + i
		end := start + bytes.IndexAny(data[start:], "\"' \t\r\n<>`")
		if end < start {
			end = len(data)
		}
		if du, err := dataurl.DecodeString(string(data[start:end])); err == nil {
			if w, ok := find(du.Data, secret, depth-1, b); ok {
				return fmt.Sprintf("data: URL at %d → %s", start, w), true
			}
		}
		off = start + 5
	}
	// Percent-encoded text outside data: URLs: a query string, a form
	// body, a URL in a unit's command line. Each run is decoded on its
	// own, escapes only ('+' stays: the secrets looked for hold none).
	for _, loc := range findAll(percentRun, data, bytes.IndexByte(data, '%') >= 0) {
		if w, ok := find(percentDecode(data[loc[0]:loc[1]]), secret, depth-1, b); ok {
			return fmt.Sprintf("percent-encoded at %d → %s", loc[0], w), true
		}
	}
	// gzip streams anywhere (a compressed data: URL's payload is found by
	// the base64 pass; a .gz file or a gzip member in a blob here).
	for off := 0; ; {
		i := bytes.Index(data[off:], []byte{0x1f, 0x8b, 0x08})
		if i < 0 {
			break
		}
		start := off + i
		if out, ok := gunzip.Prefix(data[start:], maxInflate, b); ok { // a truncated stream still shows its start
			if w, ok := find(out, secret, depth-1, b); ok {
				return fmt.Sprintf("gzip at %d → %s", start, w), true
			}
		}
		off = start + 3
	}
	// base64 runs, standard or URL alphabet, padded or not, from each of
	// the four alignments (a run may begin with a character that is not
	// part of the encoding).
	for _, loc := range findAll(base64Run, data, hasBase64Run(data)) {
		run := strings.Map(func(r rune) rune {
			switch r {
			case '\r', '\n':
				return -1
			case '-':
				return '+'
			case '_':
				return '/'
			}
			return r
		}, string(data[loc[0]:loc[1]]))
		run = strings.TrimRight(run, "=")
		for shift := 0; shift < 4 && shift < len(run); shift++ {
			s := run[shift:]
			if len(s)%4 == 1 {
				s = s[:len(s)-1] // no encoding ends so: the last character is not part of it
			}
			dec, err := base64.RawStdEncoding.DecodeString(s)
			if err != nil {
				continue
			}
			if w, ok := find(dec, secret, depth-1, b); ok {
				return fmt.Sprintf("base64 at %d → %s", loc[0]+shift, w), true
			}
		}
	}
	return "", false
}

// findAll runs re only when a cheap look at data (maybe) says it can
// match: Go's regexp walks tens of ns a byte, and the data searched can be
// the 128 MiB a config's gzip streams inflate to.
func findAll(re *regexp.Regexp, data []byte, maybe bool) [][]int {
	if !maybe {
		return nil
	}
	return re.FindAllIndex(data, -1)
}

// hasBase64Run reports whether data holds 16 base64 characters in a row
// (line breaks included), the least base64Run matches.
func hasBase64Run(data []byte) bool {
	run := 0
	for _, c := range data {
		switch {
		case 'A' <= c && c <= 'Z', 'a' <= c && c <= 'z', '0' <= c && c <= '9',
			c == '+', c == '/', c == '_', c == '-', c == '\r', c == '\n':
			if run++; run >= 16 {
				return true
			}
		default:
			run = 0
		}
	}
	return false
}

// percentDecode replaces every %XX escape in run by its byte.
func percentDecode(run []byte) []byte {
	out := make([]byte, 0, len(run))
	for i := 0; i < len(run); i++ {
		if run[i] == '%' && i+2 < len(run) && isHex(run[i+1]) && isHex(run[i+2]) {
			out = append(out, unhex(run[i+1])<<4|unhex(run[i+2]))
			i += 2
			continue
		}
		out = append(out, run[i])
	}
	return out
}

func isHex(c byte) bool {
	return '0' <= c && c <= '9' || 'a' <= c && c <= 'f' || 'A' <= c && c <= 'F'
}

func unhex(c byte) byte {
	switch {
	case c <= '9':
		return c - '0'
	case c <= 'F':
		return c - 'A' + 10
	}
	return c - 'a' + 10
}

// Hit is one file holding the secret.
type Hit struct {
	Path  string // relative to the tree scanned, slash-separated
	Where string // as Find says
	// Secret names the secret found (TreeAll); "" for Tree's one.
	Secret string
}

func (h Hit) String() string {
	if h.Secret != "" {
		return h.Path + " (" + h.Secret + ", " + h.Where + ")"
	}
	return h.Path + " (" + h.Where + ")"
}

// Secret is one value TreeAll and RawAll look for, and the name a hit
// reports it by (never the value).
type Secret struct {
	Name  string
	Value []byte
}

// Tree scans every regular file under dir.
func Tree(dir string, secret []byte) ([]Hit, error) {
	return TreeAll(dir, []Secret{{Value: secret}})
}

// TreeAll scans every regular file under dir for each secret, reading
// each file once.
func TreeAll(dir string, secrets []Secret) ([]Hit, error) {
	var hits []Hit
	err := filepath.WalkDir(dir, func(p string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		if !d.Type().IsRegular() {
			return nil
		}
		data, err := os.ReadFile(p)
		if err != nil {
			return err
		}
		rel, _ := filepath.Rel(dir, p)
		hits = append(hits, FindAll(filepath.ToSlash(rel), data, secrets)...)
		return nil
	})
	return hits, err
}

// FindAll is Find for each secret in data, named path in the hits.
func FindAll(path string, data []byte, secrets []Secret) []Hit {
	var hits []Hit
	for _, sec := range secrets {
		if len(sec.Value) == 0 {
			continue
		}
		if w := Find(data, sec.Value); w != "" {
			hits = append(hits, Hit{Path: path, Where: w, Secret: sec.Name})
		}
	}
	return hits
}

// RawPatterns are byte strings that appear in any copy of secret that is
// plain or base64-encoded (standard or URL alphabet, at any of the three
// alignments: the part of the encoding that depends on the secret alone),
// so a scan of raw blocks — a filesystem's free space, where no file
// boundary or encoding context is left — can still find it.
func RawPatterns(secret []byte) [][]byte {
	out := [][]byte{secret}
	for k := 0; k < 3; k++ {
		enc := base64.StdEncoding.EncodeToString(append(make([]byte, k), secret...))
		skip := (k*8 + 5) / 6 // characters holding bits of the k bytes before
		end := 4 * ((k + len(secret)) / 3)
		if end-skip < 8 {
			continue // too short to mean anything
		}
		p := enc[skip:end]
		out = append(out, []byte(p))
		if u := strings.NewReplacer("+", "-", "/", "_").Replace(p); u != p {
			out = append(out, []byte(u))
		}
	}
	return out
}

// Raw reads r to the end and returns the offsets where any of RawPatterns
// of secret starts.
func Raw(r io.Reader, secret []byte) ([]int64, error) {
	return RawAll(r, [][]byte{secret})
}

// RawAll is Raw for several secrets in one read of r.
func RawAll(r io.Reader, secrets [][]byte) ([]int64, error) {
	var pats [][]byte
	for _, sec := range secrets {
		if len(sec) > 0 {
			pats = append(pats, RawPatterns(sec)...)
		}
	}
	keep := 0
	for _, p := range pats {
		keep = max(keep, len(p)-1)
	}
	var hits []int64
	buf := make([]byte, 0, 4<<20+keep)
	var base int64 // offset of buf[0]
	chunk := make([]byte, 4<<20)
	for {
		n, err := r.Read(chunk)
		buf = append(buf, chunk[:n]...)
		for _, p := range pats {
			for off := 0; ; {
				i := bytes.Index(buf[off:], p)
				if i < 0 {
					break
				}
				// A match wholly inside the kept tail was counted in the
				// previous round.
				if at := base + int64(off+i); len(hits) == 0 || !containsOffset(hits, at) {
					hits = append(hits, at)
				}
				off += i + 1
			}
		}
		if err == io.EOF {
			return hits, nil
		}
		if err != nil {
			return hits, err
		}
		if len(buf) > keep {
			drop := len(buf) - keep
			base += int64(drop)
			buf = append(buf[:0], buf[drop:]...)
		}
	}
}

func containsOffset(list []int64, at int64) bool {
	for _, x := range list {
		if x == at {
			return true
		}
	}
	return false
}
