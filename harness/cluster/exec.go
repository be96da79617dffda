package cluster

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"net/url"
	"strings"

	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/remotecommand"
	utilexec "k8s.io/client-go/util/exec"
	"k8s.io/streaming/pkg/httpstream"
)

// ExitError is a command run by Exec that ran and exited non-zero, with
// what it wrote.
type ExitError struct {
	Pod            string
	Code           int
	Stdout, Stderr string
}

func (e *ExitError) Error() string {
	return fmt.Sprintf("exec in pod %s: exit status %d; stdout: %q; stderr: %q", e.Pod, e.Code, e.Stdout, e.Stderr)
}

// Exec runs command in the container of the pod ns/name through the API
// server's pods/exec (the API server reaches the node's kubelet, which
// runs it through the container runtime; the cluster needs
// Config.DialNode for a guest the host cannot route to). It returns the
// command's stdout and stderr once it exits 0; a non-zero exit is an
// *ExitError carrying both; any other error (the stream, the API server,
// the kubelet) says the command's outcome is unknown.
//
// The streams are WebSocket (the v5.channel.k8s.io protocol, kubectl's
// default since Kubernetes 1.30), with SPDY as the fallback when the
// upgrade is refused, as kubectl does (k8s.io/kubectl/pkg/cmd/exec).
func (c *Cluster) Exec(ctx context.Context, ns, name, container string, command []string) (stdout, stderr string, err error) {
	return execIn(ctx, c.restConfig(), ns, name, container, command)
}

// restConfig is client-go's configuration for the admin identity Start
// made (the same as AdminKubeconfig's).
func (c *Cluster) restConfig() *rest.Config {
	admin := c.pki.Leafs["admin"]
	return &rest.Config{Host: c.server, TLSClientConfig: rest.TLSClientConfig{
		CAData: c.CAPEM(), CertData: admin.CertPEM, KeyData: admin.KeyPEM}}
}

func execIn(ctx context.Context, cfg *rest.Config, ns, name, container string, command []string) (string, string, error) {
	if len(command) == 0 {
		return "", "", errors.New("exec: no command")
	}
	// PodExecOptions as query parameters (k8s.io/api/core/v1): one
	// command= per argument.
	q := url.Values{"container": {container}, "stdout": {"true"}, "stderr": {"true"}, "command": command}
	u, err := url.Parse(strings.TrimSuffix(cfg.Host, "/") + podsPath(ns) + "/" + url.PathEscape(name) + "/exec?" + q.Encode())
	if err != nil {
		return "", "", err
	}
	spdyExec, err := remotecommand.NewSPDYExecutor(cfg, "POST", u)
	if err != nil {
		return "", "", fmt.Errorf("exec in pod %s/%s: %w", ns, name, err)
	}
	// WebSocket needs GET (RFC 6455, 4.1).
	wsExec, err := remotecommand.NewWebSocketExecutor(cfg, "GET", u.String())
	if err != nil {
		return "", "", fmt.Errorf("exec in pod %s/%s: %w", ns, name, err)
	}
	ex, err := remotecommand.NewFallbackExecutor(wsExec, spdyExec, func(err error) bool {
		return httpstream.IsUpgradeFailure(err) || httpstream.IsHTTPSProxyError(err)
	})
	if err != nil {
		return "", "", err
	}
	var out, errOut bytes.Buffer
	err = ex.StreamWithContext(ctx, remotecommand.StreamOptions{Stdout: &out, Stderr: &errOut})
	var code utilexec.CodeExitError
	switch {
	case err == nil:
		return out.String(), errOut.String(), nil
	case errors.As(err, &code):
		return out.String(), errOut.String(), &ExitError{Pod: ns + "/" + name, Code: code.Code, Stdout: out.String(), Stderr: errOut.String()}
	}
	return out.String(), errOut.String(), fmt.Errorf("exec in pod %s/%s: %w (stdout so far %q, stderr %q)", ns, name, err, out.String(), errOut.String())
}
