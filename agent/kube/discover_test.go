package kube_test

import (
	"context"
	"errors"
	"strings"
	"testing"

	"github.com/drover-os/drover/agent/kube"
	"github.com/drover-os/drover/agent/kube/kubetest"
	"github.com/drover-os/drover/agent/nodeconfig"
)

const (
	token      = "abcdef.0123456789abcdef"
	otherToken = "zzzzzz.0123456789abcdef"
)

func pin(t *testing.T, ca *kubetest.CA) string {
	t.Helper()
	p, err := nodeconfig.CAHash(ca.PEM)
	if err != nil {
		t.Fatal(err)
	}
	return p
}

// TestDiscoverCAKeepsOnlyThePinnedCertificate: a bundle "attacker CA +
// genuine CA" passes the pin, but only the genuine certificate may come
// out: the kubelet trusts whatever the agent returns.
func TestDiscoverCAKeepsOnlyThePinnedCertificate(t *testing.T) {
	genuine, attacker := kubetest.NewCA(t, "kubernetes"), kubetest.NewCA(t, "attacker")
	srv := kubetest.NewServer(t, genuine)
	srv.Set(kubetest.ClusterInfo(kubetest.Kubeconfig(srv.URL, attacker, genuine), token))
	got, err := kube.DiscoverCA(context.Background(), srv.URL, token, pin(t, genuine))
	if err != nil {
		t.Fatal(err)
	}
	if string(got) != string(genuine.PEM) {
		t.Fatalf("discovered CA is not the pinned certificate alone:\n%s", got)
	}
}

// TestDiscoverCARefuses: every way cluster-info can fail to prove it comes
// from the cluster the token and the pin name.
func TestDiscoverCARefuses(t *testing.T) {
	genuine, attacker := kubetest.NewCA(t, "kubernetes"), kubetest.NewCA(t, "attacker")
	for _, tc := range []struct {
		name    string
		serving *kubetest.CA
		data    func(kc string) map[string]string
		want    string
		retry   bool
	}{
		{"no signature", genuine, func(kc string) map[string]string {
			return map[string]string{"kubeconfig": kc}
		}, `no signature for the bootstrap token "abcdef"`, true},
		{"wrong signature", genuine, func(kc string) map[string]string {
			d := kubetest.ClusterInfo(kc, "abcdef.ffffffffffffffff")
			return d
		}, "jws-kubeconfig-abcdef: signature does not match", false},
		{"signature of another content", genuine, func(kc string) map[string]string {
			d := kubetest.ClusterInfo(kc)
			d["jws-kubeconfig-abcdef"] = kubetest.Sign(kc+"# edited\n", token)
			return d
		}, "jws-kubeconfig-abcdef: signature does not match", false},
		{"wrong token id", genuine, func(kc string) map[string]string {
			return kubetest.ClusterInfo(kc, otherToken)
		}, `no signature for the bootstrap token "abcdef"`, true},
		{"signature whose key id is another token's", genuine, func(kc string) map[string]string {
			d := kubetest.ClusterInfo(kc)
			d["jws-kubeconfig-abcdef"] = kubetest.Sign(kc, otherToken)
			return d
		}, `JWS key id "zzzzzz", want the token id "abcdef"`, false},
		{"server not certified by the pinned CA", attacker, func(kc string) map[string]string {
			return kubetest.ClusterInfo(kc, token)
		}, "does not verify with the pinned CA", false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			srv := kubetest.NewServer(t, tc.serving)
			srv.Set(tc.data(kubetest.Kubeconfig(srv.URL, attacker, genuine)))
			got, err := kube.DiscoverCA(context.Background(), srv.URL, token, pin(t, genuine))
			if err == nil {
				t.Fatalf("accepted, CA:\n%s", got)
			}
			if !strings.Contains(err.Error(), tc.want) {
				t.Errorf("error %q does not say %q", err, tc.want)
			}
			if tc.retry && !errors.Is(err, kube.ErrUnsigned) {
				t.Errorf("error %v is not ErrUnsigned", err)
			}
			if kube.Retryable(err) != tc.retry {
				t.Errorf("Retryable = %v, want %v (%v)", !tc.retry, tc.retry, err)
			}
		})
	}
}

func TestDiscoverCAPinMismatch(t *testing.T) {
	genuine, attacker := kubetest.NewCA(t, "kubernetes"), kubetest.NewCA(t, "attacker")
	srv := kubetest.NewServer(t, attacker)
	srv.Set(kubetest.ClusterInfo(kubetest.Kubeconfig(srv.URL, attacker), token))
	_, err := kube.DiscoverCA(context.Background(), srv.URL, token, pin(t, genuine))
	if err == nil || !strings.Contains(err.Error(), "no certificate matches") || kube.Retryable(err) {
		t.Fatalf("err = %v", err)
	}
}

func TestDiscoverCAUnreachableIsRetryable(t *testing.T) {
	genuine := kubetest.NewCA(t, "kubernetes")
	srv := kubetest.NewServer(t, genuine)
	_, err := kube.DiscoverCA(context.Background(), srv.URL+"/nothing", token, pin(t, genuine))
	if err == nil || !strings.Contains(err.Error(), "404") || !kube.Retryable(err) {
		t.Fatalf("missing cluster-info: %v", err)
	}
}

// TestVerifyDetachedJWSKubernetesVectors checks the verifier against the
// signatures the Kubernetes signer (k8s.io/cluster-bootstrap/token/jws)
// produces for its own test inputs, so it agrees with the real
// bootstrapsigner and not only with kubetest.Sign.
func TestVerifyDetachedJWSKubernetesVectors(t *testing.T) {
	const content = "Hello from the other side. I must have called a thousand times."
	for _, v := range []struct{ content, secret, jws string }{
		{content, "my voice is my passcode", "eyJhbGciOiJIUzI1NiIsImtpZCI6Impvc2h1YSJ9..VShe2taLd-YTrmWuRkcL_8QTNDHYxQIEBsAYYiIj1_8"},
		{"", "my voice is my passcode", "eyJhbGciOiJIUzI1NiIsImtpZCI6Impvc2h1YSJ9..7Ui1ALizW4jXphVUB7xUqC9vLYLL9RZeOFfVLoB7Tgk"},
		{content, "", "eyJhbGciOiJIUzI1NiIsImtpZCI6Impvc2h1YSJ9..UfkqvDGiIFxrMnFseDj9LYJOLNrvjW8aHhF71mvvAs8"},
	} {
		if err := kube.VerifyDetachedJWS(v.jws, []byte(v.content), "joshua", v.secret); err != nil {
			t.Errorf("%q with secret %q: %v", v.content, v.secret, err)
		}
		if err := kube.VerifyDetachedJWS(v.jws, []byte(v.content+"x"), "joshua", v.secret); err == nil {
			t.Errorf("%q with secret %q: a different payload verified", v.content, v.secret)
		}
		if got := kubetest.Sign(v.content, "joshua."+v.secret); got != v.jws {
			t.Errorf("kubetest.Sign = %s, want %s", got, v.jws)
		}
	}
	// alg "none" and an empty signature must not pass.
	none := "eyJhbGciOiJub25lIiwia2lkIjoiam9zaHVhIn0.."
	if err := kube.VerifyDetachedJWS(none, []byte(content), "joshua", "my voice is my passcode"); err == nil {
		t.Error("alg none accepted")
	}
}
