package httpstatus

import (
	"net/http"
	"net/http/httptest"
	"testing"
)

// TestWriter keeps the first status: the one set, or 200 for a body
// written first; a later WriteHeader does not change it.
func TestWriter(t *testing.T) {
	for name, tc := range map[string]struct {
		h            func(w http.ResponseWriter)
		code, status int
	}{
		"set":           {func(w http.ResponseWriter) { w.WriteHeader(404); w.WriteHeader(500) }, 404, 404},
		"body first":    {func(w http.ResponseWriter) { w.Write([]byte("x")); w.WriteHeader(500) }, 200, 200},
		"nothing":       {func(w http.ResponseWriter) {}, 0, 200},
		"set then body": {func(w http.ResponseWriter) { w.WriteHeader(201); w.Write([]byte("x")) }, 201, 201},
	} {
		sw := &Writer{ResponseWriter: httptest.NewRecorder()}
		tc.h(sw)
		if sw.Code != tc.code || sw.Status() != tc.status {
			t.Errorf("%s: Code %d, Status %d; want %d, %d", name, sw.Code, sw.Status(), tc.code, tc.status)
		}
	}
}
