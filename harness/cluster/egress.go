package cluster

import (
	"context"
	"errors"
	"fmt"
	"io"
	stdlog "log"
	"net"
	"net/http"
	"os"
	"sync"
	"time"
)

// NodeDialer connects to addr ("ip:port", as the API server dials a
// kubelet: the Node's address and its kubeletEndpoint port) for the API
// server. An error refuses the connection.
type NodeDialer func(ctx context.Context, addr string) (net.Conn, error)

// egressConfig is the API server's EgressSelectorConfiguration
// (k8s.io/apiserver/pkg/apis/apiserver/v1beta1): the "cluster" egress,
// the API server's connections to kubelets (logs, exec, attach,
// port-forward) and to pods and services, goes through an HTTP CONNECT
// proxy on a Unix socket, as with Konnectivity in http-connect mode. A
// guest on QEMU user-mode networking has an address (100.64.0.15) the
// host cannot route to; the proxy, not a change to the host's network,
// turns it into the guest's host forward.
func egressConfig(socket string) []byte {
	return []byte(`apiVersion: apiserver.k8s.io/v1beta1
kind: EgressSelectorConfiguration
egressSelections:
- name: cluster
  connection:
    proxyProtocol: HTTPConnect
    transport:
      uds:
        udsName: ` + socket + `
`)
}

// egressProxy serves HTTP CONNECT on a Unix socket, dialling each target
// with dial.
type egressProxy struct {
	ln   net.Listener
	srv  *http.Server
	dial NodeDialer
	wg   sync.WaitGroup
}

func startEgressProxy(socket string, dial NodeDialer, log io.Writer) (*egressProxy, error) {
	os.Remove(socket) // a socket left by a killed run
	ln, err := net.Listen("unix", socket)
	if err != nil {
		return nil, fmt.Errorf("starting the API server's egress proxy on %s: %w", socket, err)
	}
	p := &egressProxy{ln: ln, dial: dial}
	p.srv = &http.Server{Handler: p, ReadHeaderTimeout: 10 * time.Second,
		ErrorLog: stdlog.New(log, "egress proxy: ", 0)}
	go p.srv.Serve(ln)
	return p, nil
}

// ServeHTTP answers one CONNECT: 200 and then the bytes both ways, or 502
// with the dial error (which the API server puts in its error to the
// client, e.g. kubectl logs).
func (p *egressProxy) ServeHTTP(w http.ResponseWriter, req *http.Request) {
	if req.Method != http.MethodConnect {
		http.Error(w, "only CONNECT", http.StatusMethodNotAllowed)
		return
	}
	ctx, cancel := context.WithTimeout(req.Context(), 30*time.Second)
	target, err := p.dial(ctx, req.Host)
	cancel()
	if err != nil {
		http.Error(w, fmt.Sprintf("dialing %s: %v", req.Host, err), http.StatusBadGateway)
		return
	}
	hj, ok := w.(http.Hijacker)
	if !ok {
		target.Close()
		http.Error(w, "cannot hijack", http.StatusInternalServerError)
		return
	}
	conn, buf, err := hj.Hijack()
	if err != nil {
		target.Close()
		return
	}
	// The client speaks first (TLS) only after this answer, so nothing
	// can be buffered yet; anything that is would be lost, so refuse.
	if buf.Reader.Buffered() > 0 {
		conn.Close()
		target.Close()
		return
	}
	if _, err := io.WriteString(conn, "HTTP/1.1 200 Connection established\r\n\r\n"); err != nil {
		conn.Close()
		target.Close()
		return
	}
	p.wg.Add(2)
	go p.pipe(conn, target)
	go p.pipe(target, conn)
}

// pipe copies src to dst; when either direction ends, both connections
// close: TLS, the only thing the API server sends through, has no
// half-close, and the end of one direction is the end of the session.
func (p *egressProxy) pipe(dst, src net.Conn) {
	defer p.wg.Done()
	io.Copy(dst, src)
	dst.Close()
	src.Close()
}

func (p *egressProxy) close() error {
	if p == nil {
		return nil
	}
	err := p.srv.Close()
	if errors.Is(err, http.ErrServerClosed) {
		err = nil
	}
	return err
}
