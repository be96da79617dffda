package publish

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"hash/crc64"
	"io"
	"net/http"
	"net/http/httptest"
	"os"
	"slices"
	"strconv"
	"strings"
	"sync/atomic"
	"testing"

	"github.com/drover-os/drover/cloud/aliyun"
)

// The upload step against harness/ecsapi's OSS: what the user reads while
// it runs, and where an interrupted upload resumes from.

// TestUploadProgress: a 20-part image reports each tenth once (not each
// part), and every line's percentage and byte counts agree with the file.
func TestUploadProgress(t *testing.T) {
	c := newCloud(t, 0)
	p := c.plan(t)
	img := bytes.Repeat([]byte("drover\n"), 20*partSize/7+1)[:20*partSize]
	if err := os.WriteFile(p.Image, img, 0o644); err != nil {
		t.Fatal(err)
	}
	if err := c.pb.upload(context.Background(), p, p.Image, p.Object); err != nil {
		t.Fatal(err)
	}
	if n := c.calls.count("oss PUT /" + p.Bucket + "/" + p.Object + " 200"); n != 20 {
		t.Fatalf("%d parts uploaded, want 20", n)
	}
	// The SDK reports each finished part; its running total crosses a
	// new tenth at every other part (the first part is 5 %, tenth 0).
	var progress []string
	for _, e := range c.seen("upload") {
		if e.Progress == "" {
			continue
		}
		progress = append(progress, e.Progress)
		var pct, done, total int64
		if _, err := fmt.Sscanf(strings.TrimPrefix(e.Message, "oss://"+p.Bucket+"/"+p.Object+": "), "%d%% (%d of %d bytes)", &pct, &done, &total); err != nil {
			t.Errorf("upload line %q: %v", e.Message, err)
			continue
		}
		if total != int64(len(img)) || done%partSize != 0 || pct != done*100/total || e.Progress != fmt.Sprintf("%d%%", pct) {
			t.Errorf("upload line %q (progress %s) for a file of %d bytes in parts of %d", e.Message, e.Progress, len(img), partSize)
		}
	}
	if want := []string{"5%", "10%", "20%", "30%", "40%", "50%", "60%", "70%", "80%", "90%", "100%"}; !slices.Equal(progress, want) {
		t.Errorf("upload progress %v, want %v", progress, want)
	}
}

// TestUploadSizeUnknown: a file whose size the file system reports as 0
// while it has content (procfs does) is uploaded in one PutObject, whose
// progress the SDK reports against a total of 0 bytes: no progress line,
// no division by zero.
func TestUploadSizeUnknown(t *testing.T) {
	const proc = "/proc/self/cmdline"
	if fi, err := os.Stat(proc); err != nil || fi.Size() != 0 {
		t.Fatalf("%s: %v, want a file of size 0 that has content", proc, err)
	}
	c := newCloud(t, 0)
	p := c.plan(t)
	p.Image = proc
	if err := c.pb.upload(context.Background(), p, p.Image, p.Object); err != nil {
		t.Fatal(err)
	}
	got, err := os.ReadFile(c.srv.ObjectPath(p.Bucket, p.Object))
	if want, _ := os.ReadFile(proc); err != nil || len(want) == 0 || !bytes.Equal(got, want) {
		t.Errorf("the object %q (%v), want %s's %q", got, err, proc, want)
	}
	for _, e := range c.seen("upload") {
		if e.Progress != "" {
			t.Errorf("progress line %+v for an upload of unknown size", e)
		}
	}
}

// front puts h in front of the emulator's OSS (emu): the Publisher's OSS
// calls go to h.
func (c *cloud) front(t *testing.T, h func(w http.ResponseWriter, r *http.Request, emu http.Handler)) {
	t.Helper()
	emu := c.srv.OSSHandler()
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) { h(w, r, emu) }))
	t.Cleanup(srv.Close)
	clients, err := aliyun.New(aliyun.Options{Region: emuRegion, OSSEndpoint: srv.URL})
	if err != nil {
		t.Fatal(err)
	}
	c.pb.Clients.OSS = clients.OSS
}

// names are the names of dir's entries.
func names(t *testing.T, dir string) []string {
	t.Helper()
	ents, err := os.ReadDir(dir)
	if err != nil {
		t.Fatal(err)
	}
	var out []string
	for _, e := range ents {
		out = append(out, e.Name())
	}
	return out
}

// TestUploadResumesFromCheckpoint: an upload that fails at its fifth
// part (OSS answers NoSuchUpload, as for an upload aborted meanwhile)
// leaves the SDK's checkpoint in CheckpointDir, not in the system's
// temporary directory; the next run reads it, asks OSS which parts it
// holds (ListParts), sends the fifth part and those after it, and
// completes the same multipart upload. The checkpoint is gone once the
// object is whole.
func TestUploadResumesFromCheckpoint(t *testing.T) {
	c := newCloud(t, 0)
	p := c.plan(t)
	tmp := t.TempDir()
	t.Setenv("TMPDIR", tmp) // the SDK's default directory (os.TempDir)
	// In front of the emulator's OSS: the first PUT of part 5 names an
	// upload ID the emulator never gave, so it is the emulator that
	// refuses it. Parts in flight beside it finish whole.
	var refused atomic.Bool
	c.front(t, func(w http.ResponseWriter, r *http.Request, emu http.Handler) {
		if q := r.URL.Query(); r.Method == http.MethodPut && q.Get("partNumber") == "5" && refused.CompareAndSwap(false, true) {
			q.Set("uploadId", "0")
			r.URL.RawQuery = q.Encode()
		}
		emu.ServeHTTP(w, r)
	})

	if err := c.pb.upload(context.Background(), p, p.Image, p.Object); !aliyun.IsCode(err, "NoSuchUpload") {
		t.Fatalf("an upload whose fifth part is refused: %v, want NoSuchUpload", err)
	}
	obj := "/" + p.Bucket + "/" + p.Object
	c.wantCalls(t, map[string]int{"oss POST " + obj + " 200": 1, "oss PUT " + obj + " 404": 1})
	if got := names(t, c.pb.CheckpointDir); len(got) != 1 || !strings.HasSuffix(got[0], ".ucp") {
		t.Errorf("CheckpointDir after the failed upload holds %v, want one checkpoint (.ucp)", got)
	}
	if got := names(t, tmp); len(got) != 0 {
		t.Errorf("the temporary directory holds %v, want the checkpoint in CheckpointDir", got)
	}

	first := c.calls.count("oss PUT " + obj + " 200")
	if err := c.pb.upload(context.Background(), p, p.Image, p.Object); err != nil {
		t.Fatal(err)
	}
	// One initiation (POST ?uploads) and one completion (POST ?uploadId)
	// over both runs: the second went on with the first one's upload
	// after ListParts (GET ?uploadId), from part 5 (parts 1 to 4 were
	// sent before part 5 was, and finished).
	c.wantCalls(t, map[string]int{"oss POST " + obj + " 200": 2, "oss GET " + obj + " 200": 1})
	if n := c.calls.count("oss PUT "+obj+" 200") - first; n != 6 {
		t.Errorf("the second run sent %d parts, want 6 (5 to 10)", n)
	}
	got, err := os.ReadFile(c.srv.ObjectPath(p.Bucket, p.Object))
	if want, _ := os.ReadFile(p.Image); err != nil || !bytes.Equal(got, want) {
		t.Errorf("the resumed object (%v) differs from the image", err)
	}
	if got := names(t, c.pb.CheckpointDir); len(got) != 0 {
		t.Errorf("CheckpointDir after the upload holds %v, want the checkpoint removed", got)
	}
}

// TestUploadResumesAfterLastPart: a run killed after its last part was
// sent and before CompleteMultipartUpload leaves its checkpoint and every
// part in OSS. The next run sends no part: it completes the upload, the
// object is the image, and the checkpoint is gone.
func TestUploadResumesAfterLastPart(t *testing.T) {
	c := newCloud(t, 0)
	p := c.plan(t)
	ctx, kill := context.WithCancel(context.Background())
	defer kill()
	var cut atomic.Bool
	c.front(t, func(w http.ResponseWriter, r *http.Request, emu http.Handler) {
		if r.Method == http.MethodPost && r.URL.Query().Has("uploadId") && cut.CompareAndSwap(false, true) {
			// The run is killed while its CompleteMultipartUpload is
			// on the way: OSS never sees it.
			_, _ = io.Copy(io.Discard, r.Body)
			kill()
			<-r.Context().Done()
			return
		}
		emu.ServeHTTP(w, r)
	})
	if err := c.pb.upload(ctx, p, p.Image, p.Object); !errors.Is(err, context.Canceled) {
		t.Fatalf("an upload killed at CompleteMultipartUpload: %v, want %v", err, context.Canceled)
	}
	obj := "/" + p.Bucket + "/" + p.Object
	c.wantCalls(t, map[string]int{"oss PUT " + obj + " 200": 10, "oss POST " + obj + " 200": 1, "oss DELETE": 0})
	if got := names(t, c.pb.CheckpointDir); len(got) != 1 {
		t.Fatalf("CheckpointDir after the killed upload holds %v, want one checkpoint", got)
	}

	if err := c.pb.upload(context.Background(), p, p.Image, p.Object); err != nil {
		t.Fatal(err)
	}
	// ListParts, no part sent again, one completion.
	c.wantCalls(t, map[string]int{"oss GET " + obj + " 200": 1, "oss PUT " + obj + " 200": 10, "oss POST " + obj + " 200": 2})
	got, err := os.ReadFile(c.srv.ObjectPath(p.Bucket, p.Object))
	if want, _ := os.ReadFile(p.Image); err != nil || !bytes.Equal(got, want) {
		t.Errorf("the resumed object (%v) differs from the image", err)
	}
	if got := names(t, c.pb.CheckpointDir); len(got) != 0 {
		t.Errorf("CheckpointDir after the upload holds %v, want the checkpoint removed", got)
	}
}

// flipFirst flips the first byte read through it.
type flipFirst struct {
	io.ReadCloser
	done bool
}

func (f *flipFirst) Read(b []byte) (int, error) {
	n, err := f.ReadCloser.Read(b)
	if n > 0 && !f.done {
		b[0] ^= 1
		f.done = true
	}
	return n, err
}

// TestPublishRefusesDamagedObject: a byte of part 3 damaged on the way
// (the part's length unchanged) gives an object that is not the image:
// publish fails naming the object's and the image's CRC-64 and imports
// nothing. The next run uploads the image anew and publishes it.
func TestPublishRefusesDamagedObject(t *testing.T) {
	c := newCloud(t, 0)
	p := c.plan(t)
	var damaged atomic.Bool
	c.front(t, func(w http.ResponseWriter, r *http.Request, emu http.Handler) {
		if r.Method == http.MethodPut && r.URL.Query().Get("partNumber") == "3" && damaged.CompareAndSwap(false, true) {
			r.Body = &flipFirst{ReadCloser: r.Body}
		}
		emu.ServeHTTP(w, r)
	})
	_, err := c.pb.Publish(context.Background(), p)
	if err == nil {
		t.Fatalf("publish of an object damaged on the way: no error, %d images imported", len(c.images(t, p, emuRegion)))
	}
	crc := func(path string) string {
		b, rerr := os.ReadFile(path)
		if rerr != nil {
			t.Fatal(rerr)
		}
		return strconv.FormatUint(crc64.Checksum(b, crc64.MakeTable(crc64.ECMA)), 10)
	}
	obj, img := crc(c.srv.ObjectPath(p.Bucket, p.Object)), crc(p.Image)
	if obj == img || !strings.Contains(err.Error(), obj) || !strings.Contains(err.Error(), img) {
		t.Fatalf("publish of an object damaged on the way (CRC-64 %s, the image's %s): %v, want an error naming both", obj, img, err)
	}
	if ims := c.images(t, p, emuRegion); len(ims) != 0 {
		t.Errorf("%d images imported from a damaged object", len(ims))
	}

	first := c.calls.count("oss PUT /" + p.Bucket + "/" + p.Object + " 200")
	if _, err := c.pb.Publish(context.Background(), p); err != nil {
		t.Fatal(err)
	}
	if n := c.calls.count("oss PUT /"+p.Bucket+"/"+p.Object+" 200") - first; n != 10 {
		t.Errorf("the run after the damaged upload sent %d parts, want all 10", n)
	}
	if ims := c.images(t, p, emuRegion); len(ims) != 1 {
		t.Errorf("%d images after the second run, want 1", len(ims))
	}
}
