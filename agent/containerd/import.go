package containerd

import (
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"slices"
	"strconv"
	"strings"
	"time"
)

// The methods of containerd's API the importer calls.
const (
	methodContentWrite  = "/containerd.services.content.v1.Content/Write"
	methodContentInfo   = "/containerd.services.content.v1.Content/Info"
	methodContentUpdate = "/containerd.services.content.v1.Content/Update"
	methodImageCreate   = "/containerd.services.images.v1.Images/Create"
	methodImageGet      = "/containerd.services.images.v1.Images/Get"
	methodImageUpdate   = "/containerd.services.images.v1.Images/Update"
	methodLeaseCreate   = "/containerd.services.leases.v1.Leases/Create"
	methodLeaseDelete   = "/containerd.services.leases.v1.Leases/Delete"
)

// writeChunk is the most data one Write message carries.
const writeChunk = 1 << 20

// leaseTTL is how long the import's lease holds its blobs if the importer
// dies before deleting it.
const leaseTTL = 10 * time.Minute

// Result is what an import did.
type Result struct {
	Written, Present int // blobs
	// Image names by what happened to their record.
	Created, Updated, Unchanged []string
}

func (r Result) String() string {
	var parts []string
	for _, p := range []struct {
		what  string
		names []string
	}{{"created", r.Created}, {"updated", r.Updated}, {"unchanged", r.Unchanged}} {
		if len(p.names) > 0 {
			parts = append(parts, p.what+" "+strings.Join(p.names, ", "))
		}
	}
	return fmt.Sprintf("%d blobs written, %d present; images %s", r.Written, r.Present, strings.Join(parts, "; "))
}

// Import puts the layout into containerd: every blob into the content
// store, labelled with its garbage-collection references, under a lease
// until the images hold them; then one image record per name, pointing at
// its target, with labels. It can run any number of times: a blob that is
// there is kept (its references labelled if they are not), an image
// record is created, or updated when its target or one of the labels
// differs (its other labels are kept: containerd's CRI adds its own).
// The images are not unpacked: containerd's CRI unpacks an image into a
// snapshot when a container first needs it.
func (c *Client) Import(ctx context.Context, l *Layout, labels map[string]string) (res Result, err error) {
	lease := "drover-import-" + strconv.FormatInt(time.Now().UnixNano(), 10)
	expire := time.Now().Add(leaseTTL).UTC().Format(time.RFC3339)
	if _, err := c.unary(ctx, methodLeaseCreate, "", createLeaseRequest(lease, map[string]string{"containerd.io/gc.expire": expire})); err != nil {
		return res, fmt.Errorf("taking a lease for the import: %w", err)
	}
	defer func() {
		// Without the lease, the images hold the blobs; a lease left
		// behind expires by itself.
		if _, derr := c.unary(context.WithoutCancel(ctx), methodLeaseDelete, "", deleteLeaseRequest(lease)); derr != nil && err == nil {
			err = fmt.Errorf("releasing the import's lease %s: %w", lease, derr)
		}
	}()
	for _, b := range l.Blobs {
		written, err := c.putBlob(ctx, lease, b)
		if err != nil {
			return res, fmt.Errorf("blob %s (%s): %w", b.Digest, b.MediaType, err)
		}
		if written {
			res.Written++
		} else {
			res.Present++
		}
	}
	for _, im := range l.Images {
		want := Image{Name: im.Name, Target: im.Target, Labels: labels}
		what, err := c.putImage(ctx, want)
		if err != nil {
			return res, fmt.Errorf("image %s: %w", im.Name, err)
		}
		switch what {
		case "created":
			res.Created = append(res.Created, im.Name)
		case "updated":
			res.Updated = append(res.Updated, im.Name)
		default:
			res.Unchanged = append(res.Unchanged, im.Name)
		}
	}
	return res, nil
}

// putBlob writes b unless the content store has it; then it makes sure
// b's labels are there. containerd answers AlreadyExists to a write that
// names an existing digest, and puts the blob under the lease.
func (c *Client) putBlob(ctx context.Context, lease string, b Blob) (bool, error) {
	ref := "drover-import-" + b.Digest
	read := func(off int64, p []byte) (int, error) { return copy(p, b.Data[off:]), nil }
	if b.Data == nil && b.Path != "" {
		f, err := os.Open(b.Path)
		if err != nil {
			return false, err
		}
		defer f.Close()
		read = func(off int64, p []byte) (int, error) {
			return io.ReadFull(io.NewSectionReader(f, off, int64(len(p))), p)
		}
	}
	_, err := c.stream(ctx, methodContentWrite, lease, func(send func([]byte) error) error {
		buf := make([]byte, min(writeChunk, b.Size))
		for off := int64(0); ; {
			n := min(int64(writeChunk), b.Size-off)
			if _, err := read(off, buf[:n]); err != nil {
				return fmt.Errorf("reading %s at %d: %w", b.Digest, off, err)
			}
			w := writeRequest{Action: writeData, Ref: ref, Offset: off, Data: buf[:n]}
			if off == 0 {
				// The first message says what the write is: an existing
				// digest ends it there.
				w.Total, w.Expected = b.Size, b.Digest
			}
			if off += n; off == b.Size {
				w.Action, w.Total, w.Expected, w.Labels = writeCommit, b.Size, b.Digest, b.Labels
				return send(w.marshal())
			}
			if err := send(w.marshal()); err != nil {
				return err
			}
		}
	})
	switch {
	case err == nil:
		return true, nil
	case !IsCode(err, AlreadyExists):
		return false, err
	}
	got, err := c.info(ctx, b.Digest)
	if err != nil {
		return false, err
	}
	missing := map[string]string{}
	for k, v := range b.Labels {
		if got.Labels[k] != v {
			missing[k] = v
		}
	}
	if len(missing) > 0 {
		if _, err := c.unary(ctx, methodContentUpdate, "", updateInfoRequest(b.Digest, missing)); err != nil {
			return false, fmt.Errorf("labelling its references: %w", err)
		}
	}
	return false, nil
}

func (c *Client) info(ctx context.Context, digest string) (contentInfo, error) {
	resp, err := c.unary(ctx, methodContentInfo, "", infoRequest(digest))
	if err != nil {
		return contentInfo{}, err
	}
	b, err := field1(resp)
	if err != nil {
		return contentInfo{}, fmt.Errorf("containerd %s: %w", methodContentInfo, err)
	}
	return parseInfo(b)
}

// putImage creates want's record, or updates the one there when its target
// or one of want's labels differs.
func (c *Client) putImage(ctx context.Context, want Image) (string, error) {
	_, err := c.unary(ctx, methodImageCreate, "", createImageRequest(want))
	switch {
	case err == nil:
		return "created", nil
	case !IsCode(err, AlreadyExists):
		return "", err
	}
	got, err := c.Image(ctx, want.Name)
	if err != nil {
		return "", err
	}
	var keys []string
	for k, v := range want.Labels {
		if got.Labels[k] != v {
			keys = append(keys, k)
		}
	}
	slices.Sort(keys)
	if got.Target == want.Target && len(keys) == 0 {
		return "unchanged", nil
	}
	if _, err := c.unary(ctx, methodImageUpdate, "", updateImageRequest(want, keys)); err != nil {
		return "", err
	}
	return "updated", nil
}

// Image returns the record of the image called name.
func (c *Client) Image(ctx context.Context, name string) (Image, error) {
	resp, err := c.unary(ctx, methodImageGet, "", getImageRequest(name))
	if err != nil {
		return Image{}, err
	}
	b, err := field1(resp)
	if err == nil && b == nil {
		err = errors.New("no image in the answer")
	}
	if err != nil {
		return Image{}, fmt.Errorf("containerd %s %s: %w", methodImageGet, name, err)
	}
	return parseImage(b)
}

// ImportArchive reads the OCI layout archive at path and imports it into
// the containerd at socket, in namespace, with labels on every image.
func ImportArchive(ctx context.Context, socket, namespace, path string, labels map[string]string) (Result, error) {
	f, err := os.Open(path)
	if err != nil {
		return Result{}, err
	}
	l, err := ReadLayout(f)
	f.Close()
	if err != nil {
		return Result{}, fmt.Errorf("%s: %w", path, err)
	}
	c := New(socket, namespace)
	defer c.Close()
	return c.Import(ctx, l, labels)
}
