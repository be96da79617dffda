package fetch

import (
	"bytes"
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"math/rand/v2"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/drover-os/drover/image/cache"
	"github.com/drover-os/drover/internal/retry"
)

func TestMain(m *testing.M) {
	if os.Getenv(childEnv) != "" {
		os.Exit(childMain())
	}
	os.Exit(m.Run())
}

// fast is Policy with short waits and n retries: the tests exercise the
// policy, not the clock.
func fast(n int) retry.Policy {
	p := Policy()
	p.Base, p.Max, p.Retries = time.Millisecond, 10*time.Millisecond, n
	return p
}

func sum(b []byte) string {
	s := sha256.Sum256(b)
	return hex.EncodeToString(s[:])
}

// content is deterministic pseudo-random data, so a child process can
// rebuild the same items from their index.
func content(i, size int) []byte {
	r := rand.New(rand.NewPCG(uint64(i), 42))
	b := make([]byte, size)
	for j := range b {
		b[j] = byte(r.Uint32())
	}
	return b
}

// fileServer serves files by path and counts requests. A hook, when set,
// may take over a request: it gets the 1-based request count for the path.
type fileServer struct {
	*httptest.Server
	mu     sync.Mutex
	files  map[string][]byte
	hits   map[string]int
	ranges map[string][]string
	hook   func(w http.ResponseWriter, r *http.Request, hit int) bool
}

func newFileServer(t testing.TB) *fileServer {
	s := &fileServer{files: map[string][]byte{}, hits: map[string]int{}, ranges: map[string][]string{}}
	s.Server = httptest.NewServer(http.HandlerFunc(s.serve))
	t.Cleanup(s.Close)
	return s
}

func (s *fileServer) serve(w http.ResponseWriter, r *http.Request) {
	s.mu.Lock()
	s.hits[r.URL.Path]++
	hit := s.hits[r.URL.Path]
	s.ranges[r.URL.Path] = append(s.ranges[r.URL.Path], r.Header.Get("Range"))
	data, ok := s.files[r.URL.Path]
	hook := s.hook
	s.mu.Unlock()
	if hook != nil && hook(w, r, hit) {
		return
	}
	if !ok {
		http.NotFound(w, r)
		return
	}
	http.ServeContent(w, r, "", time.Time{}, bytes.NewReader(data))
}

// add serves data at /name and returns the matching Item.
func (s *fileServer) add(name string, data []byte) Item {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.files["/"+name] = data
	return Item{Name: name, URL: s.URL + "/" + name, SHA256: sum(data), Size: int64(len(data))}
}

func (s *fileServer) hitCount(name string) int {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.hits["/"+name]
}

func (s *fileServer) rangeHeaders(name string) []string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return append([]string(nil), s.ranges["/"+name]...)
}

func openCache(t testing.TB, dir string) *cache.Cache {
	t.Helper()
	c, err := cache.Open(dir)
	if err != nil {
		t.Fatal(err)
	}
	return c
}

// syncBuffer is a log that goroutines may write concurrently.
type syncBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (s *syncBuffer) Write(p []byte) (int, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.Write(p)
}

func (s *syncBuffer) String() string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.String()
}

func checkFile(t testing.TB, path string, want []byte) {
	t.Helper()
	got, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	if !bytes.Equal(got, want) {
		t.Errorf("%s: content differs (sha256 %s, want %s)", path, sum(got), sum(want))
	}
}

// assertNoFiles fails if any regular file exists below dir.
func assertNoFiles(t testing.TB, dir string) {
	t.Helper()
	filepath.WalkDir(dir, func(p string, d os.DirEntry, err error) error {
		if err == nil && !d.IsDir() {
			t.Errorf("left behind: %s", p)
		}
		return nil
	})
}

func wantContains(t testing.TB, err error, subs ...string) {
	t.Helper()
	if err == nil {
		t.Fatalf("no error; want one containing %q", subs)
	}
	for _, s := range subs {
		if !strings.Contains(err.Error(), s) {
			t.Errorf("error %q\ndoes not contain %q", err, s)
		}
	}
}

func itemName(i int) string { return fmt.Sprintf("pkg%03d_1.0_amd64.deb", i) }

func openCacheErr(dir string) (*cache.Cache, error) { return cache.Open(dir) }
