// Package containerd makes the few calls of containerd's gRPC API that the
// agent needs — importing an OCI image layout into the CRI's namespace,
// pinned — without containerd's client or grpc-go.
//
// Why hand-written: the agent is what every boot waits for (docs/agent.md),
// and measured on drover-agent (go1.26.8, -trimpath -ldflags='-s -w',
// 17 891 490 bytes), linking containerd's Go client (v2.4.2, Import and
// Unpack) adds 10 625 024 bytes, the API module's generated services with
// grpc-go 6 922 240; this package adds 114 688. gRPC is HTTP/2 with length-prefixed messages
// and a status in the trailers: net/http speaks HTTP/2 without TLS (its
// Protocols), protowire (already in the agent) writes and reads the
// messages, and wire_test.go checks every message against the code
// generated from containerd's .proto files.
package containerd

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
	"strconv"
)

// Socket is containerd's default gRPC address, which the agent's
// containerd configuration keeps.
const Socket = "/run/containerd/containerd.sock"

// CRINamespace is the namespace containerd's CRI keeps its images in.
const CRINamespace = "k8s.io"

// maxMessage bounds one response message (containerd's own default limit
// for what it receives is 16 MiB).
const maxMessage = 16 << 20

// Client calls one containerd, in one namespace.
type Client struct {
	hc        *http.Client
	namespace string
}

// New returns a client of the containerd serving gRPC on the unix socket
// at path. Nothing is dialled before the first call.
func New(path, namespace string) *Client {
	p := new(http.Protocols)
	p.SetUnencryptedHTTP2(true) // gRPC without TLS: HTTP/2 "prior knowledge"
	tr := &http.Transport{
		Protocols: p,
		Proxy:     nil,
		DialContext: func(ctx context.Context, _, _ string) (net.Conn, error) {
			var d net.Dialer
			return d.DialContext(ctx, "unix", path)
		},
	}
	return &Client{hc: &http.Client{Transport: tr}, namespace: namespace}
}

// Close closes the connection.
func (c *Client) Close() { c.hc.CloseIdleConnections() }

// Code is a gRPC status code.
type Code int

// The codes containerd answers with that the importer tells apart.
const (
	OK            Code = 0
	NotFound      Code = 5
	AlreadyExists Code = 6
)

var codeNames = []string{"OK", "Canceled", "Unknown", "InvalidArgument", "DeadlineExceeded", "NotFound", "AlreadyExists",
	"PermissionDenied", "ResourceExhausted", "FailedPrecondition", "Aborted", "OutOfRange", "Unimplemented", "Internal",
	"Unavailable", "DataLoss", "Unauthenticated"}

func (c Code) String() string {
	if c >= 0 && int(c) < len(codeNames) {
		return codeNames[c]
	}
	return "Code(" + strconv.Itoa(int(c)) + ")"
}

// StatusError is a call containerd answered with a status other than OK.
type StatusError struct {
	Method  string
	Code    Code
	Message string
}

func (e *StatusError) Error() string {
	return fmt.Sprintf("containerd %s: %s: %s", e.Method, e.Code, e.Message)
}

// IsCode reports whether err is a StatusError with code.
func IsCode(err error, code Code) bool {
	var se *StatusError
	return errors.As(err, &se) && se.Code == code
}

// frame appends one gRPC message: uncompressed, its length, the bytes.
func frame(b, msg []byte) []byte {
	b = append(b, 0)
	b = binary.BigEndian.AppendUint32(b, uint32(len(msg)))
	return append(b, msg...)
}

// readFrames reads gRPC messages until the stream ends.
func readFrames(r io.Reader) ([][]byte, error) {
	var out [][]byte
	var h [5]byte
	for {
		if _, err := io.ReadFull(r, h[:]); err == io.EOF {
			return out, nil
		} else if err != nil {
			return out, fmt.Errorf("reading a message header: %w", err)
		}
		if h[0] != 0 {
			return out, fmt.Errorf("a compressed message (flag %d): none was asked for", h[0])
		}
		n := binary.BigEndian.Uint32(h[1:])
		if n > maxMessage {
			return out, fmt.Errorf("a message of %d bytes, more than %d", n, maxMessage)
		}
		m := make([]byte, n)
		if _, err := io.ReadFull(r, m); err != nil {
			return out, fmt.Errorf("reading a message of %d bytes: %w", n, err)
		}
		out = append(out, m)
	}
}

// call makes one gRPC call of method ("/containerd.services.….v1.Service/
// Method"): it sends every request message, closes its side and returns
// every response message. A unary call is one message each way; content's
// Write, a stream, takes several and answers each. lease, when set, puts
// what the call creates under that lease (containerd's gRPC metadata).
func (c *Client) call(ctx context.Context, method, lease string, reqs ...[]byte) ([][]byte, error) {
	var body []byte
	for _, m := range reqs {
		body = frame(body, m)
	}
	return c.callBody(ctx, method, lease, bytes.NewReader(body))
}

// stream is call with the request messages sent as write produces them
// (send), so that a large blob never is in memory whole.
func (c *Client) stream(ctx context.Context, method, lease string, write func(send func(msg []byte) error) error) ([][]byte, error) {
	pr, pw := io.Pipe()
	go func() {
		pw.CloseWithError(write(func(msg []byte) error {
			_, err := pw.Write(frame(nil, msg))
			return err
		}))
	}()
	defer pr.Close()
	return c.callBody(ctx, method, lease, pr)
}

func (c *Client) callBody(ctx context.Context, method, lease string, body io.Reader) ([][]byte, error) {
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, "http://containerd"+method, body)
	if err != nil {
		return nil, fmt.Errorf("containerd %s: %w", method, err)
	}
	req.Header.Set("Content-Type", "application/grpc")
	req.Header.Set("Te", "trailers")
	req.Header.Set("Containerd-Namespace", c.namespace)
	if lease != "" {
		req.Header.Set("Containerd-Lease", lease)
	}
	resp, err := c.hc.Do(req)
	if err != nil {
		return nil, fmt.Errorf("containerd %s: %w", method, err)
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		return nil, fmt.Errorf("containerd %s: HTTP %s, not a gRPC answer", method, resp.Status)
	}
	msgs, rerr := readFrames(resp.Body)
	// A call that fails before answering puts its status in the headers
	// ("Trailers-Only"); otherwise it comes in the trailers, read now.
	st, msg := resp.Trailer.Get("Grpc-Status"), resp.Trailer.Get("Grpc-Message")
	if st == "" {
		st, msg = resp.Header.Get("Grpc-Status"), resp.Header.Get("Grpc-Message")
	}
	if st == "" {
		if rerr == nil {
			rerr = errors.New("no grpc-status in the answer")
		}
		return nil, fmt.Errorf("containerd %s: %w", method, rerr)
	}
	code, err := strconv.Atoi(st)
	if err != nil {
		return nil, fmt.Errorf("containerd %s: grpc-status %q", method, st)
	}
	if code != int(OK) {
		if m, err := url.PathUnescape(msg); err == nil {
			msg = m // gRPC percent-encodes the message
		}
		return nil, &StatusError{Method: method, Code: Code(code), Message: msg}
	}
	if rerr != nil {
		return nil, fmt.Errorf("containerd %s: %w", method, rerr)
	}
	return msgs, nil
}

// unary is call with one message each way.
func (c *Client) unary(ctx context.Context, method, lease string, req []byte) ([]byte, error) {
	msgs, err := c.call(ctx, method, lease, req)
	if err != nil {
		return nil, err
	}
	if len(msgs) != 1 {
		return nil, fmt.Errorf("containerd %s: %d answers to one request", method, len(msgs))
	}
	return msgs[0], nil
}
