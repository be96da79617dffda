package main

import (
	"bytes"
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/url"
	"time"
)

// containerdSocket is the node's containerd, through the host mount.
const containerdSocket = "/host/run/containerd/containerd.sock"

// criImage is one image record of containerd's CRI namespace.
type criImage struct {
	Name   string            `json:"name"`
	Digest string            `json:"digest"` // the target's
	Labels map[string]string `json:"labels"`
}

// containerdImages lists the images of containerd's namespace ns by asking
// its images service (containerd.services.images.v1.Images/List): the
// node has no ctr. Standard library only, like the rest of the probe, and
// written apart from the agent's client (agent/containerd), whose work it
// checks: gRPC is HTTP/2 without TLS, each message a flag byte, a length
// and the protobuf bytes, the status in the trailers; the answer's few
// fields are read by their numbers in containerd's images.proto (Image:
// name 1, labels 2, target 3; Descriptor: digest 2).
func containerdImages(socket, ns string) ([]criImage, error) {
	p := new(http.Protocols)
	p.SetUnencryptedHTTP2(true)
	c := &http.Client{Timeout: 30 * time.Second, Transport: &http.Transport{Protocols: p,
		DialContext: func(ctx context.Context, _, _ string) (net.Conn, error) {
			return (&net.Dialer{}).DialContext(ctx, "unix", socket)
		}}}
	defer c.CloseIdleConnections()
	// An empty ListImagesRequest: no filters.
	req, err := http.NewRequest(http.MethodPost, "http://containerd/containerd.services.images.v1.Images/List", bytes.NewReader([]byte{0, 0, 0, 0, 0}))
	if err != nil {
		return nil, err
	}
	req.Header.Set("Content-Type", "application/grpc")
	req.Header.Set("Te", "trailers")
	req.Header.Set("Containerd-Namespace", ns)
	resp, err := c.Do(req)
	if err != nil {
		return nil, fmt.Errorf("containerd images List on %s: %w", socket, err)
	}
	defer resp.Body.Close()
	body, err := io.ReadAll(io.LimitReader(resp.Body, 64<<20))
	if err != nil {
		return nil, fmt.Errorf("containerd images List: reading the answer: %w", err)
	}
	status, msg := resp.Trailer.Get("Grpc-Status"), resp.Trailer.Get("Grpc-Message")
	if status == "" {
		status, msg = resp.Header.Get("Grpc-Status"), resp.Header.Get("Grpc-Message")
	}
	if status != "0" {
		m, _ := url.PathUnescape(msg)
		return nil, fmt.Errorf("containerd images List: HTTP %s, grpc-status %q: %s", resp.Status, status, m)
	}
	if len(body) < 5 || body[0] != 0 || int(binary.BigEndian.Uint32(body[1:5])) != len(body)-5 {
		return nil, fmt.Errorf("containerd images List: not one uncompressed message (%d bytes)", len(body))
	}
	var out []criImage
	err = pbFields(body[5:], func(num uint64, val []byte) error {
		if num != 1 { // ListImagesResponse.images
			return nil
		}
		im := criImage{Labels: map[string]string{}}
		err := pbFields(val, func(num uint64, val []byte) error {
			switch num {
			case 1:
				im.Name = string(val)
			case 2: // a map entry: key 1, value 2
				var k, v string
				err := pbFields(val, func(num uint64, val []byte) error {
					if num == 1 {
						k = string(val)
					} else if num == 2 {
						v = string(val)
					}
					return nil
				})
				im.Labels[k] = v
				return err
			case 3:
				return pbFields(val, func(num uint64, val []byte) error {
					if num == 2 {
						im.Digest = string(val)
					}
					return nil
				})
			}
			return nil
		})
		out = append(out, im)
		return err
	})
	if err != nil {
		return nil, fmt.Errorf("containerd images List: %w", err)
	}
	return out, nil
}

// pbFields calls fn with the number and bytes of each length-delimited
// field of a protobuf message; varint fields are skipped (no other wire
// types occur in the messages read).
func pbFields(b []byte, fn func(num uint64, val []byte) error) error {
	for len(b) > 0 {
		tag, n := binary.Uvarint(b)
		if n <= 0 {
			return errors.New("a bad field tag")
		}
		b = b[n:]
		switch tag & 7 {
		case 0:
			if _, n = binary.Uvarint(b); n <= 0 {
				return errors.New("a bad varint")
			}
			b = b[n:]
		case 2:
			l, n := binary.Uvarint(b)
			if n <= 0 || l > uint64(len(b)-n) {
				return errors.New("a field longer than the message")
			}
			if err := fn(tag>>3, b[n:n+int(l)]); err != nil {
				return err
			}
			b = b[n+int(l):]
		default:
			return fmt.Errorf("wire type %d, not expected here", tag&7)
		}
	}
	return nil
}
