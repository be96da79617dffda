package cluster

import (
	"bytes"
	"context"
	"crypto/tls"
	"crypto/x509"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"strings"
	"time"
)

// ErrNotFound matches (errors.Is) an APIError for a missing object.
var ErrNotFound = errors.New("not found")

// ErrAlreadyExists matches (errors.Is) an APIError for a create that found
// the object already there.
var ErrAlreadyExists = errors.New("already exists")

// APIError is a non-2xx answer of the apiserver, with the reason and message
// of the Status object it sent.
type APIError struct {
	Method, Path string
	Code         int
	Reason       string // Status.reason, e.g. NotFound, AlreadyExists, Forbidden
	Message      string
}

func (e *APIError) Error() string {
	msg := e.Message
	if msg == "" {
		msg = http.StatusText(e.Code)
	}
	return fmt.Sprintf("%s %s: %d %s: %s", e.Method, e.Path, e.Code, e.Reason, msg)
}

// Is lets errors.Is(err, ErrNotFound) and ErrAlreadyExists work.
func (e *APIError) Is(target error) bool {
	switch target {
	case ErrNotFound:
		return e.Code == http.StatusNotFound
	case ErrAlreadyExists:
		return e.Code == http.StatusConflict && e.Reason == "AlreadyExists"
	}
	return false
}

// restClient talks JSON to the apiserver: just enough REST for the
// bootstrap objects and the smoke test's queries, without client-go.
type restClient struct {
	base   string // https://host:port
	hc     *http.Client
	bearer string // token for Authorization: Bearer, if any
}

// newRESTClient trusts only caPEM and presents clientCert when given; a
// client with neither a certificate nor a bearer token is anonymous.
func newRESTClient(base string, caPEM []byte, clientCert *tls.Certificate, bearer string) (*restClient, error) {
	pool := x509.NewCertPool()
	if !pool.AppendCertsFromPEM(caPEM) {
		return nil, errors.New("creating API client: the CA PEM holds no certificate")
	}
	tc := &tls.Config{RootCAs: pool, MinVersion: tls.VersionTLS12}
	if clientCert != nil {
		tc.Certificates = []tls.Certificate{*clientCert}
	}
	tr := &http.Transport{TLSClientConfig: tc, ForceAttemptHTTP2: true, TLSHandshakeTimeout: 10 * time.Second}
	return &restClient{
		base:   strings.TrimSuffix(base, "/"),
		hc:     &http.Client{Transport: tr, Timeout: 30 * time.Second},
		bearer: bearer,
	}, nil
}

// do sends in (JSON-encoded unless it is []byte, nil for no body) and
// decodes a 2xx answer into out (unless out is nil). Any other status is an
// *APIError.
func (c *restClient) do(ctx context.Context, method, path string, in, out any) error {
	var body io.Reader
	switch v := in.(type) {
	case nil:
	case []byte:
		body = bytes.NewReader(v)
	default:
		data, err := json.Marshal(v)
		if err != nil {
			return fmt.Errorf("%s %s: encoding request: %w", method, path, err)
		}
		body = bytes.NewReader(data)
	}
	req, err := http.NewRequestWithContext(ctx, method, c.base+path, body)
	if err != nil {
		return fmt.Errorf("%s %s: %w", method, path, err)
	}
	req.Header.Set("Accept", "application/json")
	if body != nil {
		req.Header.Set("Content-Type", "application/json")
	}
	if c.bearer != "" {
		req.Header.Set("Authorization", "Bearer "+c.bearer)
	}
	resp, err := c.hc.Do(req)
	if err != nil {
		return fmt.Errorf("%s %s: %w", method, path, err)
	}
	defer resp.Body.Close()
	data, err := io.ReadAll(io.LimitReader(resp.Body, 64<<20))
	if err != nil {
		return fmt.Errorf("%s %s: reading answer: %w", method, path, err)
	}
	if resp.StatusCode < 200 || resp.StatusCode > 299 {
		e := &APIError{Method: method, Path: path, Code: resp.StatusCode}
		var st struct{ Reason, Message string }
		if json.Unmarshal(data, &st) == nil && (st.Reason != "" || st.Message != "") {
			e.Reason, e.Message = st.Reason, st.Message
		} else {
			e.Message = strings.TrimSpace(string(data))
		}
		return e
	}
	if out == nil {
		return nil
	}
	if b, ok := out.(*[]byte); ok {
		*b = data
		return nil
	}
	if err := json.Unmarshal(data, out); err != nil {
		return fmt.Errorf("%s %s: decoding answer: %w", method, path, err)
	}
	return nil
}

// createOrReplace POSTs obj to collection and, if an object of that name
// already exists (a state dir reused across starts), PUTs it over the old
// one at collection/name. The objects it is used for allow unconditional
// updates, so no resourceVersion is needed.
func (c *restClient) createOrReplace(ctx context.Context, collection, name string, obj any) error {
	err := c.do(ctx, http.MethodPost, collection, obj, nil)
	if errors.Is(err, ErrAlreadyExists) {
		err = c.do(ctx, http.MethodPut, collection+"/"+name, obj, nil)
	}
	return err
}

// close drops idle connections, so that a stopped apiserver leaves no
// half-open sockets behind in this process.
func (c *restClient) close() {
	c.hc.CloseIdleConnections()
}
