package cluster

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"k8s.io/client-go/rest"
	streaming "k8s.io/cri-streaming/pkg/streaming/remotecommand"
	utilexec "k8s.io/utils/exec"
)

// fakeRuntime runs nothing: it writes what it was asked on stdout and
// stderr and exits with code.
type fakeRuntime struct{ code int }

func (f fakeRuntime) ExecInContainer(_ context.Context, pod, _, container string, cmd []string, _ io.Reader, out, errOut io.WriteCloser, _ bool, _ <-chan streaming.TerminalSize, _ time.Duration) error {
	fmt.Fprintf(out, "%s/%s: %s\n", pod, container, strings.Join(cmd, "|"))
	fmt.Fprint(errOut, "a line on stderr")
	if f.code != 0 {
		return utilexec.CodeExitError{Err: fmt.Errorf("exit status %d", f.code), Code: f.code}
	}
	return nil
}

// execServer answers pods/exec as the kubelet's streaming server does
// (k8s.io/cri-streaming, SPDY; its WebSocket protocols are the kubelet's,
// not the v5 one the client asks the API server for, so the client falls
// back to SPDY as it does with an API server that refuses the upgrade).
func execServer(t *testing.T, code int) *httptest.Server {
	t.Helper()
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		const prefix = "/api/v1/namespaces/default/pods/"
		pod, ok := strings.CutSuffix(strings.TrimPrefix(r.URL.Path, prefix), "/exec")
		if !strings.HasPrefix(r.URL.Path, prefix) || !ok {
			http.NotFound(w, r)
			return
		}
		q := r.URL.Query()
		opts := &streaming.Options{Stdout: q.Get("stdout") == "true", Stderr: q.Get("stderr") == "true"}
		streaming.ServeExec(w, r, fakeRuntime{code}, pod, "", q.Get("container"), q["command"], opts,
			time.Minute, 10*time.Second, streaming.SupportedStreamingProtocols)
	}))
	t.Cleanup(srv.Close)
	return srv
}

// TestExec: the command reaches the container argument by argument; exit
// 0 gives its stdout and stderr; a non-zero exit is an ExitError with the
// code and both outputs, never a success.
func TestExec(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	cmd := []string{"/probe", "put-etc", "a b", "x&y=z"}
	want := "probe-pod/main: /probe|put-etc|a b|x&y=z\n"

	srv := execServer(t, 0)
	out, errOut, err := execIn(ctx, &rest.Config{Host: srv.URL}, "default", "probe-pod", "main", cmd)
	if err != nil || out != want || errOut != "a line on stderr" {
		t.Fatalf("exit 0: got %q, %q, %v; want %q", out, errOut, err, want)
	}

	srv = execServer(t, 3)
	out, _, err = execIn(ctx, &rest.Config{Host: srv.URL}, "default", "probe-pod", "main", cmd)
	var exit *ExitError
	if !errors.As(err, &exit) {
		t.Fatalf("exit 3: want an ExitError, got %v (stdout %q)", err, out)
	}
	if exit.Code != 3 || exit.Stdout != want || exit.Stderr != "a line on stderr" || !strings.Contains(err.Error(), "exit status 3") {
		t.Fatalf("exit 3: got %+v (%v)", exit, err)
	}
}

// TestExecUnreachable: no answer is an error that is not an ExitError.
func TestExecUnreachable(t *testing.T) {
	srv := execServer(t, 0)
	srv.Close()
	_, _, err := execIn(context.Background(), &rest.Config{Host: srv.URL}, "default", "p", "main", []string{"/probe"})
	var exit *ExitError
	if err == nil || errors.As(err, &exit) {
		t.Fatalf("want a stream error, got %v", err)
	}
}
