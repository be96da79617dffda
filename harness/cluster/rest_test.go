package cluster

import (
	"context"
	"encoding/json"
	"encoding/pem"
	"errors"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"
)

// fakeAPI is an httptest TLS server that records requests and answers from
// a handler function.
type fakeAPI struct {
	srv  *httptest.Server
	mu   sync.Mutex
	reqs []string // "METHOD path body"
}

func newFakeAPI(t *testing.T, answer func(method, path string, body []byte) (int, string)) (*fakeAPI, *restClient) {
	t.Helper()
	f := &fakeAPI{}
	f.srv = httptest.NewTLSServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		body, _ := io.ReadAll(r.Body)
		f.mu.Lock()
		f.reqs = append(f.reqs, r.Method+" "+r.URL.Path+" "+r.Header.Get("Authorization")+" "+string(body))
		f.mu.Unlock()
		code, text := answer(r.Method, r.URL.Path, body)
		w.Header().Set("Content-Type", "application/json")
		w.WriteHeader(code)
		io.WriteString(w, text)
	}))
	t.Cleanup(f.srv.Close)
	caPEM := pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: f.srv.Certificate().Raw})
	c, err := newRESTClient(f.srv.URL, caPEM, nil, "tok.en")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(c.close)
	return f, c
}

func (f *fakeAPI) requests() []string {
	f.mu.Lock()
	defer f.mu.Unlock()
	return append([]string(nil), f.reqs...)
}

func status(code int, reason, msg string) (int, string) {
	b, _ := json.Marshal(map[string]any{"kind": "Status", "status": "Failure", "reason": reason, "message": msg, "code": code})
	return code, string(b)
}

func TestRESTDo(t *testing.T) {
	f, c := newFakeAPI(t, func(method, path string, body []byte) (int, string) {
		switch path {
		case "/ok":
			return 200, `{"metadata":{"name":"x"}}`
		case "/missing":
			return status(404, "NotFound", `nodes "missing" not found`)
		case "/exists":
			return status(409, "AlreadyExists", "already there")
		case "/conflict":
			return status(409, "Conflict", "modified")
		}
		return 500, "plain text failure"
	})
	ctx := context.Background()
	var out struct{ Metadata struct{ Name string } }
	if err := c.do(ctx, http.MethodPost, "/ok", map[string]string{"a": "b"}, &out); err != nil || out.Metadata.Name != "x" {
		t.Errorf("do /ok: %+v %v", out, err)
	}
	if got := f.requests()[0]; got != `POST /ok Bearer tok.en {"a":"b"}` {
		t.Errorf("request = %q", got)
	}
	if err := c.do(ctx, http.MethodPost, "/ok", []byte(`{"raw":1}`), nil); err != nil {
		t.Fatal(err)
	}
	if got := f.requests()[1]; got != `POST /ok Bearer tok.en {"raw":1}` {
		t.Errorf("raw request = %q", got)
	}

	err := c.do(ctx, http.MethodGet, "/missing", nil, nil)
	var ae *APIError
	if !errors.As(err, &ae) || ae.Code != 404 || ae.Reason != "NotFound" || !errors.Is(err, ErrNotFound) || errors.Is(err, ErrAlreadyExists) {
		t.Errorf("/missing: %v", err)
	}
	if err := c.do(ctx, http.MethodPost, "/exists", nil, nil); !errors.Is(err, ErrAlreadyExists) {
		t.Errorf("/exists: %v", err)
	}
	if err := c.do(ctx, http.MethodPut, "/conflict", nil, nil); errors.Is(err, ErrAlreadyExists) || err == nil {
		t.Errorf("/conflict: %v", err)
	}
	err = c.do(ctx, http.MethodGet, "/other", nil, nil)
	if err == nil || !strings.Contains(err.Error(), "GET /other: 500") || !strings.Contains(err.Error(), "plain text failure") {
		t.Errorf("/other: %v", err)
	}
}

func TestRESTRefusesUnknownServer(t *testing.T) {
	srv := httptest.NewTLSServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {}))
	defer srv.Close()
	ca, _ := NewCA("other", testNow)
	c, err := newRESTClient(srv.URL, ca.CertPEM(), nil, "")
	if err != nil {
		t.Fatal(err)
	}
	if err := c.do(context.Background(), http.MethodGet, "/", nil, nil); err == nil {
		t.Error("a server whose certificate is not from the CA was trusted")
	}
	if _, err := newRESTClient(srv.URL, []byte("no pem"), nil, ""); err == nil {
		t.Error("an empty CA was accepted")
	}
}

func TestCreateOrReplace(t *testing.T) {
	f, c := newFakeAPI(t, func(method, path string, body []byte) (int, string) {
		if method == http.MethodPost {
			return status(409, "AlreadyExists", "exists")
		}
		return 200, `{}`
	})
	if err := c.createOrReplace(context.Background(), "/api/v1/namespaces/kube-public/configmaps", "cluster-info", map[string]int{"x": 1}); err != nil {
		t.Fatal(err)
	}
	want := []string{
		`POST /api/v1/namespaces/kube-public/configmaps Bearer tok.en {"x":1}`,
		`PUT /api/v1/namespaces/kube-public/configmaps/cluster-info Bearer tok.en {"x":1}`,
	}
	if got := f.requests(); strings.Join(got, "\n") != strings.Join(want, "\n") {
		t.Errorf("requests:\n%s\nwant:\n%s", strings.Join(got, "\n"), strings.Join(want, "\n"))
	}
}
