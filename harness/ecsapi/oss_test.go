package ecsapi

import (
	"bytes"
	"context"
	"errors"
	"io"
	"os"
	"strings"
	"syscall"
	"testing"
	"testing/iotest"
	"time"

	"github.com/aliyun/alibabacloud-oss-go-sdk-v2/oss"
)

// diskBytes returns n bytes that are mostly zeros, like a disk image.
func diskBytes(n int) []byte {
	b := make([]byte, n)
	for i := 0; i < n; i += 150 << 10 {
		copy(b[i:], "block at "+strings.Repeat("x", i%97))
	}
	return b
}

func TestOSSMultipartUpload(t *testing.T) {
	e := newEnv(t, Config{})
	e.srv.CreateBucket("images")
	ctx := context.Background()
	data := diskBytes(1<<20 + 12345)

	// The SDK's uploader checks each part's and the whole object's CRC-64
	// against what the emulator answers.
	up := e.oss.NewUploader(func(o *oss.UploaderOptions) { o.PartSize = 256 << 10 })
	res, err := up.UploadFrom(ctx, &oss.PutObjectRequest{Bucket: oss.Ptr("images"), Key: oss.Ptr("b/disk.raw")},
		bytes.NewReader(data))
	if err != nil {
		t.Fatal(err)
	}
	if !strings.HasSuffix(oss.ToString(res.ETag), `-5"`) {
		t.Fatalf("multipart ETag %s, want 5 parts", oss.ToString(res.ETag))
	}
	head, err := e.oss.HeadObject(ctx, &oss.HeadObjectRequest{Bucket: oss.Ptr("images"), Key: oss.Ptr("b/disk.raw")})
	if err != nil {
		t.Fatal(err)
	}
	if head.ContentLength != int64(len(data)) || oss.ToString(head.ETag) != oss.ToString(res.ETag) {
		t.Fatalf("HeadObject: length %d etag %s", head.ContentLength, oss.ToString(head.ETag))
	}
	get, err := e.oss.GetObject(ctx, &oss.GetObjectRequest{Bucket: oss.Ptr("images"), Key: oss.Ptr("b/disk.raw")})
	if err != nil {
		t.Fatal(err)
	}
	got, err := io.ReadAll(get.Body)
	get.Body.Close()
	if err != nil || !bytes.Equal(got, data) {
		t.Fatalf("GetObject returned %d bytes (%v), want the %d uploaded", len(got), err, len(data))
	}
	onDisk, err := os.ReadFile(e.srv.ObjectPath("images", "b/disk.raw"))
	if err != nil || !bytes.Equal(onDisk, data) {
		t.Fatalf("ObjectPath holds %d bytes (%v)", len(onDisk), err)
	}
	// Zero blocks are not written: the stored image stays sparse.
	var st syscall.Stat_t
	if err := syscall.Stat(e.srv.ObjectPath("images", "b/disk.raw"), &st); err != nil {
		t.Fatal(err)
	}
	if st.Blocks*512 >= int64(len(data))/2 {
		t.Fatalf("the stored object uses %d bytes for %d, want it sparse", st.Blocks*512, len(data))
	}

	list, err := e.oss.ListObjectsV2(ctx, &oss.ListObjectsV2Request{Bucket: oss.Ptr("images"), Prefix: oss.Ptr("b/")})
	if err != nil {
		t.Fatal(err)
	}
	if len(list.Contents) != 1 || oss.ToString(list.Contents[0].Key) != "b/disk.raw" || list.Contents[0].Size != int64(len(data)) {
		t.Fatalf("ListObjectsV2: %+v", list.Contents)
	}

	_, err = e.oss.HeadObject(ctx, &oss.HeadObjectRequest{Bucket: oss.Ptr("images"), Key: oss.Ptr("missing")})
	wantOSSCode(t, err, "NoSuchKey")
	_, err = e.oss.GetObject(ctx, &oss.GetObjectRequest{Bucket: oss.Ptr("nobucket"), Key: oss.Ptr("k")})
	wantOSSCode(t, err, "NoSuchBucket")
	_, err = ossClient(e.eps, "LTAIunknown").GetObject(ctx, &oss.GetObjectRequest{Bucket: oss.Ptr("images"), Key: oss.Ptr("b/disk.raw")})
	wantOSSCode(t, err, "InvalidAccessKeyId")
}

func TestOSSAbortAndPartRules(t *testing.T) {
	e := newEnv(t, Config{})
	e.srv.CreateBucket("images")
	ctx := context.Background()
	key := oss.Ptr("k")
	init, err := e.oss.InitiateMultipartUpload(ctx, &oss.InitiateMultipartUploadRequest{Bucket: oss.Ptr("images"), Key: key})
	if err != nil {
		t.Fatal(err)
	}
	if oss.ToString(init.Key) != "k" || oss.ToString(init.UploadId) == "" {
		t.Fatalf("InitiateMultipartUpload: %+v", init)
	}
	var parts []oss.UploadPart
	for i, size := range []int{1000, 2000} { // the first part is below the 100 KB minimum
		p, err := e.oss.UploadPart(ctx, &oss.UploadPartRequest{Bucket: oss.Ptr("images"), Key: key,
			UploadId: init.UploadId, PartNumber: int32(i + 1), Body: bytes.NewReader(diskBytes(size))})
		if err != nil {
			t.Fatal(err)
		}
		parts = append(parts, oss.UploadPart{PartNumber: int32(i + 1), ETag: p.ETag})
	}
	// ListParts pages through the parts so far, in order.
	lp, err := e.oss.ListParts(ctx, &oss.ListPartsRequest{Bucket: oss.Ptr("images"), Key: key, UploadId: init.UploadId, MaxParts: 1})
	if err != nil {
		t.Fatal(err)
	}
	if len(lp.Parts) != 1 || lp.Parts[0].PartNumber != 1 || lp.Parts[0].Size != 1000 || oss.ToString(lp.Parts[0].ETag) != oss.ToString(parts[0].ETag) ||
		!lp.IsTruncated || lp.NextPartNumberMarker != 1 {
		t.Fatalf("ListParts max-parts 1: %+v", lp)
	}
	lp, err = e.oss.ListParts(ctx, &oss.ListPartsRequest{Bucket: oss.Ptr("images"), Key: key, UploadId: init.UploadId, PartNumberMarker: 1})
	if err != nil {
		t.Fatal(err)
	}
	if len(lp.Parts) != 1 || lp.Parts[0].PartNumber != 2 || lp.Parts[0].Size != 2000 || lp.IsTruncated {
		t.Fatalf("ListParts after part 1: %+v", lp)
	}
	_, err = e.oss.ListParts(ctx, &oss.ListPartsRequest{Bucket: oss.Ptr("images"), Key: key, UploadId: oss.Ptr("NOSUCHUPLOAD")})
	wantOSSCode(t, err, "NoSuchUpload")
	_, err = e.oss.CompleteMultipartUpload(ctx, &oss.CompleteMultipartUploadRequest{Bucket: oss.Ptr("images"), Key: key,
		UploadId: init.UploadId, CompleteMultipartUpload: &oss.CompleteMultipartUpload{Parts: parts}})
	wantOSSCode(t, err, "EntityTooSmall")
	if _, err := e.oss.AbortMultipartUpload(ctx, &oss.AbortMultipartUploadRequest{Bucket: oss.Ptr("images"), Key: key,
		UploadId: init.UploadId}); err != nil {
		t.Fatal(err)
	}
	_, err = e.oss.UploadPart(ctx, &oss.UploadPartRequest{Bucket: oss.Ptr("images"), Key: key,
		UploadId: init.UploadId, PartNumber: 3, Body: strings.NewReader("x")})
	wantOSSCode(t, err, "NoSuchUpload")

	// A plain PutObject answers the MD5 ETag and is readable at ObjectPath.
	put(t, e, "images", "small", "hello")
	if b, err := os.ReadFile(e.srv.ObjectPath("images", "small")); err != nil || string(b) != "hello" {
		t.Fatalf("ObjectPath content %q (%v)", b, err)
	}
}

// A part whose body ends before its Content-Length (the client cut off
// mid-part) is refused and never listed: a resumed upload asks ListParts
// what is there and would otherwise skip a truncated part.
func TestOSSTruncatedPartNotKept(t *testing.T) {
	logged := make(chan string, 16)
	e := newEnv(t, Config{Log: lineFunc(func(l string) { logged <- l })})
	e.srv.CreateBucket("images")
	ctx := context.Background()
	key := oss.Ptr("k")
	init, err := e.oss.InitiateMultipartUpload(ctx, &oss.InitiateMultipartUploadRequest{Bucket: oss.Ptr("images"), Key: key})
	if err != nil {
		t.Fatal(err)
	}
	cut := io.MultiReader(bytes.NewReader(diskBytes(200<<10)), iotest.ErrReader(errors.New("connection lost")))
	_, err = e.oss.UploadPart(ctx, &oss.UploadPartRequest{Bucket: oss.Ptr("images"), Key: key,
		UploadId: init.UploadId, PartNumber: 1, ContentLength: oss.Ptr(int64(400 << 10)), Body: cut})
	if err == nil {
		t.Fatal("UploadPart of a body cut off after 200 KiB of 400 KiB succeeded")
	}
	// The emulator's line for the part's PUT says the server is done with it.
	for deadline := time.After(10 * time.Second); ; {
		select {
		case l := <-logged:
			if !strings.Contains(l, "oss PUT") || !strings.HasSuffix(strings.TrimSpace(l), " part 1") {
				continue
			}
			if !strings.Contains(l, " 400 ") {
				t.Errorf("the cut-off part was answered %q, want 400", l)
			}
		case <-deadline:
			t.Fatal("the emulator never answered the cut-off part's PUT")
		}
		break
	}
	lp, err := e.oss.ListParts(ctx, &oss.ListPartsRequest{Bucket: oss.Ptr("images"), Key: key, UploadId: init.UploadId})
	if err != nil {
		t.Fatal(err)
	}
	if len(lp.Parts) != 0 {
		t.Fatalf("ListParts after a cut-off part: %+v, want none", lp.Parts)
	}
}

// lineFunc is an io.Writer calling f with each write (the emulator writes
// one line at a time).
type lineFunc func(string)

func (f lineFunc) Write(p []byte) (int, error) { f(string(p)); return len(p), nil }
