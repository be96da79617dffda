package main

import (
	"encoding/binary"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"reflect"
	"strings"
	"testing"

	imagesapi "github.com/containerd/containerd/api/services/images/v1"
	"github.com/containerd/containerd/api/types"
	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/types/known/timestamppb"
)

// TestContainerdImages: the probe reads containerd's answer to images List
// as containerd's generated code writes it, and says what went wrong when
// containerd refuses. (The test uses containerd's api module; the probe,
// built alone, does not.)
func TestContainerdImages(t *testing.T) {
	dir, err := os.MkdirTemp("", "probe-") // short: sun_path
	if err != nil {
		t.Fatal(err)
	}
	defer os.RemoveAll(dir)
	sock := filepath.Join(dir, "c.sock")
	ln, err := net.Listen("unix", sock)
	if err != nil {
		t.Fatal(err)
	}
	refuse := false
	srv := &http.Server{Protocols: new(http.Protocols), Handler: http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "application/grpc")
		if refuse || r.URL.Path != "/containerd.services.images.v1.Images/List" || r.Header.Get("Containerd-Namespace") != "k8s.io" {
			w.Header().Set("Grpc-Status", "7")
			w.Header().Set("Grpc-Message", "not%20allowed")
			return
		}
		now := timestamppb.Now()
		msg, _ := proto.Marshal(&imagesapi.ListImagesResponse{Images: []*imagesapi.Image{
			{Name: "drover.dev/pause:3.10", Labels: map[string]string{"io.cri-containerd.pinned": "pinned", "io.cri-containerd.image": "managed"},
				Target: &types.Descriptor{MediaType: "application/vnd.oci.image.index.v1+json", Digest: "sha256:a9c3", Size: 607}, CreatedAt: now, UpdatedAt: now},
			{Name: "sha256:3c83", Target: &types.Descriptor{Digest: "sha256:a9c3", Size: 607}},
		}})
		w.Header().Set("Trailer", "Grpc-Status")
		w.Write(binary.BigEndian.AppendUint32([]byte{0}, uint32(len(msg))))
		w.Write(msg)
		w.Header().Set("Grpc-Status", "0")
	})}
	srv.Protocols.SetUnencryptedHTTP2(true)
	go srv.Serve(ln)
	defer srv.Close()

	got, err := containerdImages(sock, "k8s.io")
	if err != nil {
		t.Fatal(err)
	}
	want := []criImage{
		{Name: "drover.dev/pause:3.10", Digest: "sha256:a9c3", Labels: map[string]string{"io.cri-containerd.pinned": "pinned", "io.cri-containerd.image": "managed"}},
		{Name: "sha256:3c83", Digest: "sha256:a9c3", Labels: map[string]string{}},
	}
	if !reflect.DeepEqual(got, want) {
		t.Errorf("images\n %+v\nwant\n %+v", got, want)
	}
	refuse = true
	if _, err := containerdImages(sock, "k8s.io"); err == nil || !strings.Contains(err.Error(), `grpc-status "7": not allowed`) {
		t.Errorf("refused: %v", err)
	}
	if _, err := containerdImages(filepath.Join(dir, "none"), "k8s.io"); err == nil || !strings.Contains(err.Error(), "containerd images List on "+filepath.Join(dir, "none")) {
		t.Errorf("no containerd: %v", err)
	}
}
