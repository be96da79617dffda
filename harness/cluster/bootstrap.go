package cluster

import (
	"context"
	"crypto/rand"
	"errors"
	"fmt"
	"math/big"
	"net/http"
	"regexp"
	"strings"
	"time"

	"github.com/drover-os/drover/agent/kube"
)

// Names of the groups and bindings that make kubelet TLS bootstrap work
// (the same shape kubeadm creates, under a drover: prefix).
const (
	BootstrapGroup      = "system:bootstrappers"
	BootstrapExtraGroup = "system:bootstrappers:drover"
	tokenTTL            = 24 * time.Hour
)

// tokenRE is the bootstrap token format the apiserver accepts.
var tokenRE = regexp.MustCompile(`^([a-z0-9]{6})\.([a-z0-9]{16})$`)

const tokenAlphabet = "abcdefghijklmnopqrstuvwxyz0123456789"

// NewBootstrapToken returns a random bootstrap token "<id>.<secret>".
func NewBootstrapToken() (string, error) {
	id, err := randomString(6)
	if err != nil {
		return "", err
	}
	secret, err := randomString(16)
	if err != nil {
		return "", err
	}
	return id + "." + secret, nil
}

func randomString(n int) (string, error) {
	var b strings.Builder
	max := big.NewInt(int64(len(tokenAlphabet)))
	for range n {
		i, err := rand.Int(rand.Reader, max)
		if err != nil {
			return "", fmt.Errorf("generating bootstrap token: %w", err)
		}
		b.WriteByte(tokenAlphabet[i.Int64()])
	}
	return b.String(), nil
}

// splitToken returns the id and secret of a well-formed token.
func splitToken(token string) (id, secret string, err error) {
	m := tokenRE.FindStringSubmatch(token)
	if m == nil {
		return "", "", fmt.Errorf("bootstrap token %q is not <6 of [a-z0-9]>.<16 of [a-z0-9]>", token)
	}
	return m[1], m[2], nil
}

// object is one API object Start creates: where it goes and what it is.
type object struct {
	collection string // e.g. /api/v1/namespaces/kube-system/secrets
	name       string
	body       map[string]any
}

func (o object) String() string { return o.collection + "/" + o.name }

// bootstrapObjects are the objects kubelet TLS bootstrap needs: the token
// secret, the RBAC that lets its holders create node CSRs and have them
// approved, renewal for nodes, and the cluster-info ConfigMap for CA-pinned
// discovery (bootstrapsigner adds the token's JWS signature to it).
func bootstrapObjects(token string, expires time.Time, clusterInfoKubeconfig []byte) ([]object, error) {
	id, secret, err := splitToken(token)
	if err != nil {
		return nil, err
	}
	crb := func(name, role, group string) object {
		return object{"/apis/rbac.authorization.k8s.io/v1/clusterrolebindings", name, map[string]any{
			"apiVersion": "rbac.authorization.k8s.io/v1", "kind": "ClusterRoleBinding",
			"metadata": map[string]any{"name": name},
			"roleRef":  map[string]any{"apiGroup": "rbac.authorization.k8s.io", "kind": "ClusterRole", "name": role},
			"subjects": []any{map[string]any{"apiGroup": "rbac.authorization.k8s.io", "kind": "Group", "name": group}},
		}}
	}
	const kubePublic = "/apis/rbac.authorization.k8s.io/v1/namespaces/kube-public"
	return []object{
		{"/api/v1/namespaces/kube-system/secrets", "bootstrap-token-" + id, map[string]any{
			"apiVersion": "v1", "kind": "Secret",
			"metadata": map[string]any{"name": "bootstrap-token-" + id, "namespace": "kube-system"},
			"type":     "bootstrap.kubernetes.io/token",
			"stringData": map[string]string{
				"description":                    "drover local cluster: kubelet TLS bootstrap",
				"token-id":                       id,
				"token-secret":                   secret,
				"expiration":                     expires.UTC().Format(time.RFC3339),
				"usage-bootstrap-authentication": "true",
				"usage-bootstrap-signing":        "true",
				"auth-extra-groups":              BootstrapExtraGroup,
			},
		}},
		crb("drover:kubelet-bootstrap", "system:node-bootstrapper", BootstrapGroup),
		crb("drover:node-autoapprove-bootstrap", "system:certificates.k8s.io:certificatesigningrequests:nodeclient", BootstrapGroup),
		crb("drover:node-autoapprove-certificate-rotation",
			"system:certificates.k8s.io:certificatesigningrequests:selfnodeclient", "system:nodes"),
		{"/api/v1/namespaces/kube-public/configmaps", "cluster-info", map[string]any{
			"apiVersion": "v1", "kind": "ConfigMap",
			"metadata": map[string]any{"name": "cluster-info", "namespace": "kube-public"},
			"data":     map[string]string{"kubeconfig": string(clusterInfoKubeconfig)},
		}},
		// Discovery reads cluster-info before it has any credentials.
		{kubePublic + "/roles", "drover:bootstrap-signer-clusterinfo", map[string]any{
			"apiVersion": "rbac.authorization.k8s.io/v1", "kind": "Role",
			"metadata": map[string]any{"name": "drover:bootstrap-signer-clusterinfo", "namespace": "kube-public"},
			"rules": []any{map[string]any{"apiGroups": []string{""}, "resources": []string{"configmaps"},
				"resourceNames": []string{"cluster-info"}, "verbs": []string{"get"}}},
		}},
		{kubePublic + "/rolebindings", "drover:bootstrap-signer-clusterinfo", map[string]any{
			"apiVersion": "rbac.authorization.k8s.io/v1", "kind": "RoleBinding",
			"metadata": map[string]any{"name": "drover:bootstrap-signer-clusterinfo", "namespace": "kube-public"},
			"roleRef": map[string]any{"apiGroup": "rbac.authorization.k8s.io", "kind": "Role",
				"name": "drover:bootstrap-signer-clusterinfo"},
			"subjects": []any{map[string]any{"apiGroup": "rbac.authorization.k8s.io", "kind": "User",
				"name": "system:anonymous"}},
		}},
	}, nil
}

// createObjects creates (or, on a reused state dir, replaces) objs in order.
func createObjects(ctx context.Context, c *restClient, objs []object) error {
	for _, o := range objs {
		if err := c.createOrReplace(ctx, o.collection, o.name, o.body); err != nil {
			return fmt.Errorf("creating bootstrap object %s: %w", o, err)
		}
	}
	return nil
}

// waitClusterInfoSigned waits until the controller manager's
// bootstrapsigner has signed cluster-info for the token, and checks that
// signature with the agent's own verifier: a node that pins the CA by
// caHash refuses unsigned cluster-info, so a guest booted before the
// signer ran would only be waiting, and one whose verifier disagreed with
// the real signer would never join.
func (c *Cluster) waitClusterInfoSigned(ctx context.Context) error {
	id, secret, err := splitToken(c.token)
	if err != nil {
		return err
	}
	var kubeconfig, sig string
	if err := waitFor(ctx, "cluster-info to be signed for token "+id, c.controller, func(ctx context.Context) error {
		var cm struct {
			Data map[string]string `json:"data"`
		}
		if err := c.client.do(ctx, http.MethodGet, "/api/v1/namespaces/kube-public/configmaps/cluster-info", nil, &cm); err != nil {
			return err
		}
		var ok bool
		if sig, ok = cm.Data["jws-kubeconfig-"+id]; !ok {
			return errors.New("no jws-kubeconfig-" + id + " yet (is bootstrapsigner in --controllers?)")
		}
		kubeconfig = cm.Data["kubeconfig"]
		return nil
	}); err != nil {
		return err
	}
	// A signature that does not verify will not start to: fail at once.
	if err := kube.VerifyDetachedJWS(sig, []byte(kubeconfig), id, secret); err != nil {
		return fmt.Errorf("starting local cluster: cluster-info's jws-kubeconfig-%s does not verify with the token as drover-agent checks it: %w", id, err)
	}
	return nil
}
