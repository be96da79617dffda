package containerd

import (
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"net"
	"net/http"
	"net/url"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"testing"

	contentapi "github.com/containerd/containerd/api/services/content/v1"
	imagesapi "github.com/containerd/containerd/api/services/images/v1"
	leasesapi "github.com/containerd/containerd/api/services/leases/v1"
	"google.golang.org/protobuf/proto"
)

// fakeContainerd answers the importer's calls as containerd's services do
// (plugins/services/content/contentserver, images, leases), over gRPC on
// HTTP/2 without TLS, decoding with containerd's generated code. It keeps
// blobs, images and leases in memory and records every call.
type fakeContainerd struct {
	mu     sync.Mutex
	blobs  map[string]*contentapi.Info
	images map[string]*imagesapi.Image
	leases map[string]map[string]string
	calls  []string // "method lease" per call
	writes [][]*contentapi.WriteContentRequest
	fail   map[string]int // method → gRPC code to answer with
}

func startFake(t *testing.T) (*fakeContainerd, string) {
	t.Helper()
	dir, err := os.MkdirTemp("", "drover-fake-") // short: sun_path
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { os.RemoveAll(dir) })
	sock := filepath.Join(dir, "c.sock")
	ln, err := net.Listen("unix", sock)
	if err != nil {
		t.Fatal(err)
	}
	f := &fakeContainerd{blobs: map[string]*contentapi.Info{}, images: map[string]*imagesapi.Image{}, leases: map[string]map[string]string{}, fail: map[string]int{}}
	srv := &http.Server{Handler: f, Protocols: new(http.Protocols)}
	srv.Protocols.SetUnencryptedHTTP2(true)
	go srv.Serve(ln)
	t.Cleanup(func() { srv.Close() })
	return f, sock
}

func (f *fakeContainerd) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	f.mu.Lock()
	defer f.mu.Unlock()
	fail := func(code int, format string, args ...any) {
		w.Header().Set("Content-Type", "application/grpc")
		w.Header().Set("Grpc-Status", strconv.Itoa(code)) // Trailers-Only, as grpc-go answers an error
		w.Header().Set("Grpc-Message", url.PathEscape(fmt.Sprintf(format, args...)))
		w.WriteHeader(http.StatusOK)
	}
	if r.ProtoMajor != 2 || r.Method != http.MethodPost || r.Header.Get("Content-Type") != "application/grpc" {
		http.Error(w, "not gRPC", http.StatusUnsupportedMediaType)
		return
	}
	f.calls = append(f.calls, r.URL.Path+" "+r.Header.Get("Containerd-Lease"))
	if ns := r.Header.Get("Containerd-Namespace"); ns != CRINamespace {
		fail(3, "namespace %q", ns)
		return
	}
	if code := f.fail[r.URL.Path]; code != 0 {
		fail(code, "told to fail: %s", r.URL.Path)
		return
	}
	msgs, err := readFrames(r.Body)
	if err != nil || len(msgs) == 0 {
		fail(13, "reading the request: %v", err)
		return
	}
	var out []proto.Message
	switch r.URL.Path {
	case methodContentWrite:
		var reqs []*contentapi.WriteContentRequest
		var data []byte
		for i, m := range msgs {
			req := &contentapi.WriteContentRequest{}
			if err := proto.Unmarshal(m, req); err != nil {
				fail(3, "%v", err)
				return
			}
			reqs = append(reqs, req)
			if i == 0 && f.blobs[req.Expected] != nil {
				f.writes = append(f.writes, reqs)
				fail(6, "blob with expected digest %v exists", req.Expected)
				return
			}
			if req.Offset != int64(len(data)) {
				fail(11, "write @%v must occur at current offset %v", req.Offset, len(data))
				return
			}
			data = append(data, req.Data...)
			out = append(out, &contentapi.WriteContentResponse{Action: req.Action, Offset: int64(len(data))})
			if req.Action == contentapi.WriteAction_COMMIT {
				sum := sha256.Sum256(data)
				if got := "sha256:" + hex.EncodeToString(sum[:]); got != req.Expected || int64(len(data)) != req.Total {
					fail(9, "unexpected commit digest %s or size %d", got, len(data))
					return
				}
				f.blobs[req.Expected] = &contentapi.Info{Digest: req.Expected, Size: req.Total, Labels: req.Labels}
			}
		}
		f.writes = append(f.writes, reqs)
	case methodContentInfo:
		req := &contentapi.InfoRequest{}
		proto.Unmarshal(msgs[0], req)
		if f.blobs[req.Digest] == nil {
			fail(5, "content digest %s: not found", req.Digest)
			return
		}
		out = append(out, &contentapi.InfoResponse{Info: f.blobs[req.Digest]})
	case methodContentUpdate:
		req := &contentapi.UpdateRequest{}
		proto.Unmarshal(msgs[0], req)
		b := f.blobs[req.Info.Digest]
		if b.Labels == nil {
			b.Labels = map[string]string{}
		}
		for _, p := range req.UpdateMask.Paths {
			k := strings.TrimPrefix(p, "labels.")
			b.Labels[k] = req.Info.Labels[k]
		}
		out = append(out, &contentapi.UpdateResponse{Info: b})
	case methodImageCreate:
		req := &imagesapi.CreateImageRequest{}
		proto.Unmarshal(msgs[0], req)
		if f.images[req.Image.Name] != nil {
			fail(6, "image %q: already exists", req.Image.Name)
			return
		}
		if f.blobs[req.Image.Target.Digest] == nil {
			fail(9, "target %s not in the content store", req.Image.Target.Digest)
			return
		}
		f.images[req.Image.Name] = req.Image
		out = append(out, &imagesapi.CreateImageResponse{Image: req.Image})
	case methodImageGet:
		req := &imagesapi.GetImageRequest{}
		proto.Unmarshal(msgs[0], req)
		if f.images[req.Name] == nil {
			fail(5, "image %q: not found", req.Name)
			return
		}
		out = append(out, &imagesapi.GetImageResponse{Image: f.images[req.Name]})
	case methodImageUpdate:
		req := &imagesapi.UpdateImageRequest{}
		proto.Unmarshal(msgs[0], req)
		im := f.images[req.Image.Name]
		for _, p := range req.UpdateMask.Paths {
			if p == "target" {
				im.Target = req.Image.Target
				continue
			}
			k := strings.TrimPrefix(p, "labels.")
			im.Labels[k] = req.Image.Labels[k]
		}
		out = append(out, &imagesapi.UpdateImageResponse{Image: im})
	case methodLeaseCreate:
		req := &leasesapi.CreateRequest{}
		proto.Unmarshal(msgs[0], req)
		f.leases[req.ID] = req.Labels
		out = append(out, &leasesapi.CreateResponse{Lease: &leasesapi.Lease{ID: req.ID, Labels: req.Labels}})
	case methodLeaseDelete:
		req := &leasesapi.DeleteRequest{}
		proto.Unmarshal(msgs[0], req)
		delete(f.leases, req.ID)
		out = append(out, &leasesapi.ListRequest{}) // google.protobuf.Empty: no fields
	default:
		fail(12, "unknown method %s", r.URL.Path)
		return
	}
	w.Header().Set("Content-Type", "application/grpc")
	w.Header().Set("Trailer", "Grpc-Status")
	w.WriteHeader(http.StatusOK)
	for _, m := range out {
		b, _ := proto.Marshal(m)
		w.Write(frame(nil, b))
	}
	w.Header().Set("Grpc-Status", "0")
}

func (f *fakeContainerd) methods() string {
	f.mu.Lock()
	defer f.mu.Unlock()
	var out []string
	for _, c := range f.calls {
		m, lease, _ := strings.Cut(c, " ")
		m = m[strings.LastIndex(m, ".")+1:]
		if lease != "" {
			m += "(leased)"
		}
		out = append(out, m)
	}
	f.calls = nil
	return strings.Join(out, " ")
}

var pin = map[string]string{"io.cri-containerd.pinned": "pinned"}

// TestImport: a first import writes every blob under a lease, labelled,
// and creates both names pinned; the next changes nothing and writes no
// blob twice; one after someone removed a label and a reference puts
// them back and leaves the CRI's own labels alone.
func TestImport(t *testing.T) {
	f, sock := startFake(t)
	data, digest := sandboxLayout(t)
	l, err := ReadLayout(bytes.NewReader(data))
	if err != nil {
		t.Fatal(err)
	}
	c := New(sock, CRINamespace)
	defer c.Close()
	ctx := context.Background()

	res, err := c.Import(ctx, l, pin)
	if err != nil {
		t.Fatal(err)
	}
	if got := res.String(); got != "7 blobs written, 0 present; images created drover.dev/pause:3.10, drover.dev/pause@"+digest {
		t.Errorf("first import: %s", got)
	}
	if got, want := f.methods(), "Leases/Create"+strings.Repeat(" Content/Write(leased)", 7)+" Images/Create Images/Create Leases/Delete"; got != want {
		t.Errorf("calls\n %s\nwant\n %s", got, want)
	}
	for _, b := range l.Blobs {
		got := f.blobs[b.Digest]
		if got == nil || len(got.Labels) != len(b.Labels) {
			t.Errorf("blob %s stored as %v, want labels %v", b.Digest, got, b.Labels)
		}
	}
	for _, im := range l.Images {
		got := f.images[im.Name]
		if got == nil || got.Target.Digest != digest || got.Labels["io.cri-containerd.pinned"] != "pinned" {
			t.Errorf("image %s stored as %v", im.Name, got)
		}
	}
	if len(f.leases) != 0 {
		t.Errorf("leases left: %v", f.leases)
	}

	res, err = c.Import(ctx, l, pin)
	if err != nil {
		t.Fatal(err)
	}
	if res.Written != 0 || res.Present != 7 || len(res.Unchanged) != 2 {
		t.Errorf("second import: %s", res)
	}
	// Each existing blob: one write, stopped at its first message, and
	// its labels read; each image: created already, read, left.
	if got, want := f.methods(), "Leases/Create"+strings.Repeat(" Content/Write(leased) Content/Info", 7)+" Images/Create Images/Get Images/Create Images/Get Leases/Delete"; got != want {
		t.Errorf("calls\n %s\nwant\n %s", got, want)
	}
	for _, w := range f.writes[7:] {
		if len(w) != 1 || w[0].Expected == "" || w[0].Total == 0 {
			t.Errorf("a write of an existing blob must say its digest and size in its first message: %v", w)
		}
	}

	// The CRI's own label stays; the removed pin and reference come back.
	f.images[l.Images[0].Name].Labels = map[string]string{"io.cri-containerd.image": "managed"}
	index := l.Blobs[len(l.Blobs)-1]
	delete(f.blobs[index.Digest].Labels, "containerd.io/gc.ref.content.m.1")
	res, err = c.Import(ctx, l, pin)
	if err != nil {
		t.Fatal(err)
	}
	if strings.Join(res.Updated, " ") != l.Images[0].Name || len(res.Unchanged) != 1 {
		t.Errorf("import after the pin's removal: %s", res)
	}
	if got := f.images[l.Images[0].Name].Labels; len(got) != 2 || got["io.cri-containerd.image"] != "managed" || got["io.cri-containerd.pinned"] != "pinned" {
		t.Errorf("labels after the update: %v", got)
	}
	if got := f.blobs[index.Digest].Labels; len(got) != 2 {
		t.Errorf("the index's references after the import: %v", got)
	}
	if got := f.methods(); !strings.Contains(got, "Content/Info Content/Update") || !strings.Contains(got, "Images/Get Images/Update") {
		t.Errorf("calls %s: want the index's labels and the image updated", got)
	}
}

// TestImportWritesLargeBlobsInChunks: a blob over a message's worth goes
// in several, at their offsets, the last one committing.
func TestImportWritesLargeBlobsInChunks(t *testing.T) {
	f, sock := startFake(t)
	data := bytes.Repeat([]byte("layer"), (2*writeChunk+100)/5)
	sum := sha256.Sum256(data)
	d := Descriptor{MediaType: "application/vnd.oci.image.layer.v1.tar", Digest: "sha256:" + hex.EncodeToString(sum[:]), Size: int64(len(data))}
	l := &Layout{Blobs: []Blob{{Descriptor: d, Data: data}}, Images: []Image{{Name: "x/y:z", Target: d}}}
	c := New(sock, CRINamespace)
	defer c.Close()
	if _, err := c.Import(context.Background(), l, nil); err != nil {
		t.Fatal(err)
	}
	w := f.writes[0]
	if len(w) != 3 || w[0].Offset != 0 || w[1].Offset != writeChunk || w[2].Offset != 2*writeChunk ||
		w[0].Action != contentapi.WriteAction_WRITE || w[2].Action != contentapi.WriteAction_COMMIT || f.blobs[d.Digest] == nil {
		var got []string
		for _, m := range w {
			got = append(got, fmt.Sprintf("%v@%d+%d", m.Action, m.Offset, len(m.Data)))
		}
		t.Errorf("writes %v", got)
	}
}

// TestImportErrors: a refusal names the image or blob, the call and what
// containerd said, and the lease is released all the same; no containerd
// is a dial error naming the call.
func TestImportErrors(t *testing.T) {
	f, sock := startFake(t)
	data, _ := sandboxLayout(t)
	l, err := ReadLayout(bytes.NewReader(data))
	if err != nil {
		t.Fatal(err)
	}
	f.fail[methodImageCreate] = 7
	c := New(sock, CRINamespace)
	defer c.Close()
	_, err = c.Import(context.Background(), l, pin)
	want := "image drover.dev/pause:3.10: containerd /containerd.services.images.v1.Images/Create: PermissionDenied: told to fail: /containerd.services.images.v1.Images/Create"
	if err == nil || err.Error() != want {
		t.Errorf("error\n %v\nwant\n %s", err, want)
	}
	if len(f.leases) != 0 {
		t.Errorf("a failed import left its lease: %v", f.leases)
	}

	f.fail = map[string]int{methodLeaseCreate: 14}
	if _, err := c.Import(context.Background(), l, pin); err == nil || !strings.HasPrefix(err.Error(), "taking a lease for the import: containerd /containerd.services.leases.v1.Leases/Create: Unavailable: ") {
		t.Errorf("lease refused: %v", err)
	}

	gone := New(filepath.Join(t.TempDir(), "none.sock"), CRINamespace)
	if _, err := gone.Import(context.Background(), l, pin); err == nil || !strings.Contains(err.Error(), "containerd /containerd.services.leases.v1.Leases/Create: ") || !strings.Contains(err.Error(), "none.sock") {
		t.Errorf("no containerd: %v", err)
	}
}

func TestFrames(t *testing.T) {
	b := frame(frame(nil, []byte("one")), nil)
	msgs, err := readFrames(bytes.NewReader(b))
	if err != nil || len(msgs) != 2 || string(msgs[0]) != "one" || len(msgs[1]) != 0 {
		t.Errorf("round trip: %q, %v", msgs, err)
	}
	for _, tc := range []struct {
		name string
		b    []byte
		want string
	}{
		{"compressed", []byte{1, 0, 0, 0, 0}, "a compressed message"},
		{"too large", []byte{0, 0xff, 0, 0, 0}, "a message of 4278190080 bytes"},
		{"truncated", []byte{0, 0, 0, 0, 9, 'a'}, "reading a message of 9 bytes"},
		{"short header", []byte{0, 0}, "reading a message header"},
	} {
		if _, err := readFrames(bytes.NewReader(tc.b)); err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("%s: %v, want %q", tc.name, err, tc.want)
		}
	}
	if got := Code(16).String() + " " + Code(42).String(); got != "Unauthenticated Code(42)" {
		t.Errorf("codes: %s", got)
	}
}
