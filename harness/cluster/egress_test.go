package cluster

import (
	"bufio"
	"context"
	"errors"
	"io"
	"net"
	"net/http"
	"path/filepath"
	"strings"
	"testing"

	"sigs.k8s.io/yaml"
)

// TestEgressProxy: a CONNECT to the address the dialer knows is answered
// 200 and carries bytes both ways; one it refuses is answered 502 with
// the dialer's error, as the API server reports it to kubectl.
func TestEgressProxy(t *testing.T) {
	echo, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer echo.Close()
	go func() {
		for {
			c, err := echo.Accept()
			if err != nil {
				return
			}
			go func() { io.Copy(c, c); c.Close() }()
		}
	}()
	dial := func(ctx context.Context, addr string) (net.Conn, error) {
		if addr != "100.64.0.15:10250" {
			return nil, errors.New("no such guest")
		}
		var d net.Dialer
		return d.DialContext(ctx, "tcp", echo.Addr().String())
	}
	sock := filepath.Join(t.TempDir(), "egress.sock")
	p, err := startEgressProxy(sock, dial, io.Discard)
	if err != nil {
		t.Fatal(err)
	}
	defer p.close()

	connect := func(addr string) (*http.Response, net.Conn, *bufio.Reader) {
		c, err := net.Dial("unix", sock)
		if err != nil {
			t.Fatal(err)
		}
		io.WriteString(c, "CONNECT "+addr+" HTTP/1.1\r\nHost: 127.0.0.1\r\n\r\n")
		br := bufio.NewReader(c)
		res, err := http.ReadResponse(br, nil)
		if err != nil {
			t.Fatal(err)
		}
		return res, c, br
	}
	res, c, br := connect("100.64.0.15:10250")
	if res.StatusCode != 200 || br.Buffered() != 0 {
		t.Fatalf("CONNECT to the guest: %s, %d bytes buffered", res.Status, br.Buffered())
	}
	io.WriteString(c, "ping\n")
	line, err := br.ReadString('\n')
	if err != nil || line != "ping\n" {
		t.Errorf("through the tunnel: %q, %v", line, err)
	}
	c.Close()

	res, c, _ = connect("10.0.0.1:10250")
	body, _ := io.ReadAll(res.Body)
	c.Close()
	if res.StatusCode != http.StatusBadGateway || !strings.Contains(string(body), "no such guest") {
		t.Errorf("CONNECT elsewhere: %s %q, want 502 with the dialer's error", res.Status, body)
	}
}

// TestEgressConfig: the file is the v1beta1 EgressSelectorConfiguration
// with the cluster egress on the socket (the API server refuses to start
// on a file it cannot read; the QEMU run shows it accepted).
func TestEgressConfig(t *testing.T) {
	var cfg struct {
		APIVersion, Kind string
		EgressSelections []struct {
			Name       string
			Connection struct {
				ProxyProtocol string
				Transport     struct{ UDS struct{ UDSName string } }
			}
		}
	}
	if err := yaml.UnmarshalStrict(egressConfig("/s/egress.sock"), &cfg); err != nil {
		t.Fatal(err)
	}
	if cfg.APIVersion != "apiserver.k8s.io/v1beta1" || cfg.Kind != "EgressSelectorConfiguration" || len(cfg.EgressSelections) != 1 {
		t.Fatalf("%+v", cfg)
	}
	e := cfg.EgressSelections[0]
	if e.Name != "cluster" || e.Connection.ProxyProtocol != "HTTPConnect" || e.Connection.Transport.UDS.UDSName != "/s/egress.sock" {
		t.Errorf("%+v", e)
	}
}
