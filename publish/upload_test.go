package publish

import (
	"bytes"
	"context"
	"fmt"
	"net/http"
	"net/http/httptest"
	"os"
	"slices"
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
	if err := c.pb.upload(context.Background(), p); err != nil {
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
	if err := c.pb.upload(context.Background(), p); err != nil {
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
	emu := c.srv.OSSHandler()
	front := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if q := r.URL.Query(); r.Method == http.MethodPut && q.Get("partNumber") == "5" && refused.CompareAndSwap(false, true) {
			q.Set("uploadId", "0")
			r.URL.RawQuery = q.Encode()
		}
		emu.ServeHTTP(w, r)
	}))
	defer front.Close()
	clients, err := aliyun.New(aliyun.Options{Region: emuRegion, OSSEndpoint: front.URL})
	if err != nil {
		t.Fatal(err)
	}
	c.pb.Clients.OSS = clients.OSS

	if err := c.pb.upload(context.Background(), p); !aliyun.IsCode(err, "NoSuchUpload") {
		t.Fatalf("an upload whose fifth part is refused: %v, want NoSuchUpload", err)
	}
	obj := "/" + p.Bucket + "/" + p.Object
	c.wantCalls(t, map[string]int{"oss POST " + obj + " 200": 1, "oss PUT " + obj + " 404": 1})
	names := func(dir string) []string {
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
	if got := names(c.pb.CheckpointDir); len(got) != 1 || !strings.HasSuffix(got[0], ".ucp") {
		t.Errorf("CheckpointDir after the failed upload holds %v, want one checkpoint (.ucp)", got)
	}
	if got := names(tmp); len(got) != 0 {
		t.Errorf("the temporary directory holds %v, want the checkpoint in CheckpointDir", got)
	}

	first := c.calls.count("oss PUT " + obj + " 200")
	if err := c.pb.upload(context.Background(), p); err != nil {
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
	if got := names(c.pb.CheckpointDir); len(got) != 0 {
		t.Errorf("CheckpointDir after the upload holds %v, want the checkpoint removed", got)
	}
}
