package containerd

import (
	"testing"

	contentapi "github.com/containerd/containerd/api/services/content/v1"
	imagesapi "github.com/containerd/containerd/api/services/images/v1"
	leasesapi "github.com/containerd/containerd/api/services/leases/v1"
	"github.com/containerd/containerd/api/types"
	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/types/known/fieldmaskpb"
	"google.golang.org/protobuf/types/known/timestamppb"
)

// The messages the agent writes by hand must be the ones containerd's
// generated code reads, field for field; what it reads by hand must be
// what that code writes. The api module is only a test dependency: the
// agent does not link it (cmd/drover-agent's build test).

var (
	desc       = Descriptor{MediaType: "application/vnd.oci.image.index.v1+json", Digest: "sha256:a9c3", Size: 607}
	pinned     = map[string]string{"io.cri-containerd.pinned": "pinned", "b": ""}
	apiDesc    = &types.Descriptor{MediaType: desc.MediaType, Digest: desc.Digest, Size: desc.Size}
	apiImage   = &imagesapi.Image{Name: "drover.dev/pause:3.10", Labels: pinned, Target: apiDesc}
	ourImage   = Image{Name: "drover.dev/pause:3.10", Labels: pinned, Target: desc}
	stamp      = timestamppb.Now()
	bigPayload = make([]byte, 300)
)

func TestRequestsAreWhatContainerdReads(t *testing.T) {
	for _, tc := range []struct {
		name string
		ours []byte
		into proto.Message
		want proto.Message
	}{
		{"WriteContentRequest commit", writeRequest{Action: writeCommit, Ref: "r", Total: 300, Expected: "sha256:1", Offset: 7, Data: bigPayload, Labels: pinned}.marshal(),
			&contentapi.WriteContentRequest{},
			&contentapi.WriteContentRequest{Action: contentapi.WriteAction_COMMIT, Ref: "r", Total: 300, Expected: "sha256:1", Offset: 7, Data: bigPayload, Labels: pinned}},
		{"WriteContentRequest write", writeRequest{Action: writeData, Ref: "r", Data: []byte("x")}.marshal(),
			&contentapi.WriteContentRequest{}, &contentapi.WriteContentRequest{Action: contentapi.WriteAction_WRITE, Ref: "r", Data: []byte("x")}},
		{"InfoRequest", infoRequest("sha256:1"), &contentapi.InfoRequest{}, &contentapi.InfoRequest{Digest: "sha256:1"}},
		{"UpdateRequest", updateInfoRequest("sha256:1", map[string]string{"containerd.io/gc.ref.content.m.1": "sha256:3", "containerd.io/gc.ref.content.m.0": "sha256:2"}),
			&contentapi.UpdateRequest{},
			&contentapi.UpdateRequest{Info: &contentapi.Info{Digest: "sha256:1", Labels: map[string]string{"containerd.io/gc.ref.content.m.0": "sha256:2", "containerd.io/gc.ref.content.m.1": "sha256:3"}},
				UpdateMask: &fieldmaskpb.FieldMask{Paths: []string{"labels.containerd.io/gc.ref.content.m.0", "labels.containerd.io/gc.ref.content.m.1"}}}},
		{"CreateImageRequest", createImageRequest(ourImage), &imagesapi.CreateImageRequest{}, &imagesapi.CreateImageRequest{Image: apiImage}},
		{"GetImageRequest", getImageRequest("n"), &imagesapi.GetImageRequest{}, &imagesapi.GetImageRequest{Name: "n"}},
		{"UpdateImageRequest", updateImageRequest(ourImage, []string{"io.cri-containerd.pinned"}), &imagesapi.UpdateImageRequest{},
			&imagesapi.UpdateImageRequest{Image: apiImage, UpdateMask: &fieldmaskpb.FieldMask{Paths: []string{"target", "labels.io.cri-containerd.pinned"}}}},
		{"leases CreateRequest", createLeaseRequest("l", map[string]string{"containerd.io/gc.expire": "2026-12-01T00:00:00Z"}), &leasesapi.CreateRequest{},
			&leasesapi.CreateRequest{ID: "l", Labels: map[string]string{"containerd.io/gc.expire": "2026-12-01T00:00:00Z"}}},
		{"leases DeleteRequest", deleteLeaseRequest("l"), &leasesapi.DeleteRequest{}, &leasesapi.DeleteRequest{ID: "l"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if err := (proto.UnmarshalOptions{DiscardUnknown: false}).Unmarshal(tc.ours, tc.into); err != nil {
				t.Fatalf("containerd's code cannot read it: %v", err)
			}
			if !proto.Equal(tc.into, tc.want) {
				t.Errorf("containerd reads\n %v\nwant\n %v", tc.into, tc.want)
			}
			if unknown := tc.into.ProtoReflect().GetUnknown(); len(unknown) > 0 {
				t.Errorf("fields containerd does not know: %x", unknown)
			}
		})
	}
}

func TestAnswersAreReadAsContainerdWritesThem(t *testing.T) {
	img, err := proto.Marshal(&imagesapi.GetImageResponse{Image: &imagesapi.Image{Name: "n", Labels: pinned,
		Target:    &types.Descriptor{MediaType: desc.MediaType, Digest: desc.Digest, Size: desc.Size, Annotations: map[string]string{"x": "y"}},
		CreatedAt: stamp, UpdatedAt: stamp}})
	if err != nil {
		t.Fatal(err)
	}
	b, err := field1(img)
	if err != nil {
		t.Fatal(err)
	}
	got, err := parseImage(b)
	if err != nil {
		t.Fatal(err)
	}
	if got.Name != "n" || got.Target != desc || len(got.Labels) != 2 || got.Labels["io.cri-containerd.pinned"] != "pinned" || got.Labels["b"] != "" {
		t.Errorf("image read as %+v", got)
	}

	info, err := proto.Marshal(&contentapi.InfoResponse{Info: &contentapi.Info{Digest: "sha256:1", Size: 404, CreatedAt: stamp, UpdatedAt: stamp, Labels: pinned}})
	if err != nil {
		t.Fatal(err)
	}
	if b, err = field1(info); err != nil {
		t.Fatal(err)
	}
	in, err := parseInfo(b)
	if err != nil || in.Digest != "sha256:1" || in.Size != 404 || in.Labels["io.cri-containerd.pinned"] != "pinned" || len(in.Labels) != 2 {
		t.Errorf("info read as %+v, %v", in, err)
	}

	// A truncated answer is an error, not a half-read record.
	if _, err := parseImage(b[:len(b)-3]); err == nil {
		t.Error("a truncated message was read without error")
	}
}
