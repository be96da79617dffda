// Package kube is the agent's small Kubernetes API client: it discovers
// the cluster CA of a hash-pinned node file (discover.go), asks the API
// server about its own Node and reports drift, with the kubelet's own client
// certificate and the pinned cluster CA. No client-go: the agent needs four
// requests, and client-go would multiply its size.
package kube

import (
	"bytes"
	"context"
	"crypto/tls"
	"crypto/x509"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"strings"
	"time"
)

// Client talks to one API server.
type Client struct {
	Server string // https://host:port
	HTTP   *http.Client
}

// New builds a client that trusts only caPEM and presents the kubelet's
// client certificate (certFile and keyFile may be the same PEM file, as
// kubelet-client-current.pem is).
func New(server string, caPEM []byte, certFile, keyFile string) (*Client, error) {
	pool := x509.NewCertPool()
	if !pool.AppendCertsFromPEM(caPEM) {
		return nil, fmt.Errorf("cluster CA: no certificate in PEM")
	}
	cert, err := tls.LoadX509KeyPair(certFile, keyFile)
	if err != nil {
		return nil, fmt.Errorf("loading kubelet client certificate %s: %w", certFile, err)
	}
	tr := &http.Transport{TLSClientConfig: &tls.Config{RootCAs: pool, Certificates: []tls.Certificate{cert}, MinVersion: tls.VersionTLS12}}
	return &Client{Server: strings.TrimSuffix(server, "/"), HTTP: &http.Client{Transport: tr, Timeout: 15 * time.Second}}, nil
}

// Condition is a Node condition.
type Condition struct {
	Type               string `json:"type"`
	Status             string `json:"status"`
	Reason             string `json:"reason,omitempty"`
	Message            string `json:"message,omitempty"`
	LastTransitionTime string `json:"lastTransitionTime,omitempty"`
	LastHeartbeatTime  string `json:"lastHeartbeatTime,omitempty"`
}

// Node is the part of a Node object the agent reads.
type Node struct {
	Metadata struct {
		Name   string            `json:"name"`
		UID    string            `json:"uid"`
		Labels map[string]string `json:"labels"`
	} `json:"metadata"`
	Spec struct {
		ProviderID string `json:"providerID"`
	} `json:"spec"`
	Status struct {
		Conditions []Condition `json:"conditions"`
	} `json:"status"`
}

// ReadySince returns whether the Ready condition is True and was posted
// at or after since (its lastHeartbeatTime, whole seconds), and its reason.
// A Node keeps the condition its kubelet posted before a reboot until the
// node lifecycle controller marks it Unknown, tens of seconds later: a
// Ready older than this boot's kubelet says nothing about it.
func (n *Node) ReadySince(since time.Time) (bool, string) {
	c := n.condition("Ready")
	if c == nil {
		return false, "no Ready condition yet"
	}
	why := c.Reason + ": " + c.Message
	if c.Status != "True" {
		return false, why
	}
	hb, err := time.Parse(time.RFC3339, c.LastHeartbeatTime)
	if err != nil {
		return false, fmt.Sprintf("Ready condition without a valid lastHeartbeatTime (%q)", c.LastHeartbeatTime)
	}
	if hb.Before(since.Truncate(time.Second)) {
		return false, fmt.Sprintf("Ready condition last posted %s, before this boot's kubelet started (%s)",
			hb.UTC().Format(time.RFC3339), since.UTC().Format(time.RFC3339))
	}
	return true, why
}

// Ready says whether the Node's Ready condition is True, whenever posted.
func (n *Node) Ready() bool {
	c := n.condition("Ready")
	return c != nil && c.Status == "True"
}

// condition returns the Node's condition of type t (nil: none).
func (n *Node) condition(t string) *Condition {
	for i := range n.Status.Conditions {
		if n.Status.Conditions[i].Type == t {
			return &n.Status.Conditions[i]
		}
	}
	return nil
}

// GetNode reads the Node called name.
func (c *Client) GetNode(ctx context.Context, name string) (*Node, error) {
	var n Node
	if err := c.do(ctx, "GET", "/api/v1/nodes/"+url.PathEscape(name), "", nil, &n); err != nil {
		return nil, err
	}
	return &n, nil
}

// SetCondition adds or updates a condition on the Node's status (a
// strategic merge on conditions, keyed by type, so the kubelet's own
// conditions are untouched).
func (c *Client) SetCondition(ctx context.Context, name string, cond Condition) error {
	now := time.Now().UTC().Format(time.RFC3339)
	cond.LastHeartbeatTime, cond.LastTransitionTime = now, now
	patch := map[string]any{"status": map[string]any{"conditions": []Condition{cond}}}
	return c.do(ctx, "PATCH", "/api/v1/nodes/"+url.PathEscape(name)+"/status", "application/strategic-merge-patch+json", patch, nil)
}

// Cordon marks the Node unschedulable (spec.unschedulable, what kubectl
// cordon sets). A node may do it with its own credentials: NodeRestriction
// forbids a node its own taints, not this; the node lifecycle controller
// then taints it node.kubernetes.io/unschedulable:NoSchedule.
func (c *Client) Cordon(ctx context.Context, name string) error {
	patch := map[string]any{"spec": map[string]any{"unschedulable": true}}
	return c.do(ctx, "PATCH", "/api/v1/nodes/"+url.PathEscape(name), "application/strategic-merge-patch+json", patch, nil)
}

// Event records a Warning event about the Node.
func (c *Client) Event(ctx context.Context, node, nodeUID, reason, message string) error {
	now := time.Now().UTC().Format(time.RFC3339)
	ev := map[string]any{
		"apiVersion": "v1", "kind": "Event",
		"metadata":       map[string]any{"generateName": node + ".drover-", "namespace": "default"},
		"involvedObject": map[string]any{"kind": "Node", "name": node, "uid": nodeUID},
		"reason":         reason, "message": message, "type": "Warning",
		"source":         map[string]any{"component": "drover-agent", "host": node},
		"firstTimestamp": now, "lastTimestamp": now, "count": 1,
	}
	return c.do(ctx, "POST", "/api/v1/namespaces/default/events", "application/json", ev, nil)
}

func (c *Client) do(ctx context.Context, method, path, ctype string, body, out any) error {
	var rd io.Reader
	if body != nil {
		b, err := json.Marshal(body)
		if err != nil {
			return err
		}
		rd = bytes.NewReader(b)
	}
	req, err := http.NewRequestWithContext(ctx, method, c.Server+path, rd)
	if err != nil {
		return err
	}
	if ctype != "" {
		req.Header.Set("Content-Type", ctype)
	}
	req.Header.Set("Accept", "application/json")
	resp, err := c.HTTP.Do(req)
	if err != nil {
		return fmt.Errorf("%s %s: %w", method, path, err)
	}
	defer resp.Body.Close()
	data, _ := io.ReadAll(io.LimitReader(resp.Body, 4<<20))
	if resp.StatusCode/100 != 2 {
		return fmt.Errorf("%s %s: %s: %s", method, path, resp.Status, strings.TrimSpace(string(data)))
	}
	if out != nil {
		if err := json.Unmarshal(data, out); err != nil {
			return fmt.Errorf("%s %s: decoding: %w", method, path, err)
		}
	}
	return nil
}

// Healthz asks a kubelet healthz endpoint (http://127.0.0.1:10248/healthz).
func Healthz(ctx context.Context, endpoint string) error {
	req, err := http.NewRequestWithContext(ctx, "GET", endpoint, nil)
	if err != nil {
		return err
	}
	resp, err := (&http.Client{Timeout: 5 * time.Second}).Do(req)
	if err != nil {
		return err
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(io.LimitReader(resp.Body, 4096))
	if resp.StatusCode != 200 {
		return fmt.Errorf("%s: %s %s", endpoint, resp.Status, strings.TrimSpace(string(b)))
	}
	return nil
}
