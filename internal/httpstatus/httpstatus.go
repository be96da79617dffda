// Package httpstatus records the status an http.Handler answered, for the
// emulators' request logs (the harness registry, the ECS metadata service):
// the log holds what the client read, not what the handler meant to send.
package httpstatus

import "net/http"

// Writer wraps a ResponseWriter and keeps the first status written: the
// one WriteHeader set, or 200 when the handler wrote a body first.
type Writer struct {
	http.ResponseWriter
	Code int
}

func (w *Writer) WriteHeader(code int) {
	if w.Code == 0 {
		w.Code = code
	}
	w.ResponseWriter.WriteHeader(code)
}

func (w *Writer) Write(b []byte) (int, error) {
	if w.Code == 0 {
		w.Code = http.StatusOK
	}
	return w.ResponseWriter.Write(b)
}

// Status is the status the client read: a handler that wrote nothing
// answered 200 (net/http sends it when the handler returns).
func (w *Writer) Status() int {
	if w.Code == 0 {
		return http.StatusOK
	}
	return w.Code
}
