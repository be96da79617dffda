package registry

import (
	"context"
	"net/http"
	"strings"
	"testing"

	"github.com/google/go-containerregistry/pkg/v1/random"
)

// TestPrivateRepositoryNeedsAToken: a private repository refuses an
// anonymous pull with a Bearer challenge, the realm refuses a wrong login
// and exchanges a right one for a pull token, with which the pull works;
// public repositories stay anonymous, and the request log names the login.
func TestPrivateRepositoryNeedsAToken(t *testing.T) {
	ctx := context.Background()
	var logBuf syncBuffer
	reg, err := Start(ctx, "127.0.0.1:0", &logBuf)
	if err != nil {
		t.Fatal(err)
	}
	defer reg.Close()
	reg.RequireToken("private/", func(user, pass string) (string, bool) {
		return "role drover-node", user == "cr_temp_user" && pass == "issued"
	})
	img, err := random.Image(512, 1)
	if err != nil {
		t.Fatal(err)
	}
	if err := Push(ctx, reg, "private/app", "v1", img); err != nil {
		t.Fatalf("pushing a private image: %v", err)
	}
	if err := Push(ctx, reg, "public/app", "v1", img); err != nil {
		t.Fatal(err)
	}
	base := "http://" + reg.Addr()

	// Anonymous: 401 with the challenge a client follows.
	resp, err := http.Get(base + "/v2/private/app/manifests/v1")
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	want := `Bearer realm="http://` + reg.Addr() + `/auth",service="drover-harness",scope="repository:private/app:pull"`
	if resp.StatusCode != http.StatusUnauthorized || resp.Header.Get("WWW-Authenticate") != want {
		t.Errorf("anonymous pull: %s, challenge %q", resp.Status, resp.Header.Get("WWW-Authenticate"))
	}
	for _, login := range [][2]string{{"", ""}, {"cr_temp_user", "wrong"}} {
		if _, err := FetchManifest(ctx, base, "private/app", "v1", login[0], login[1]); err == nil || !strings.Contains(err.Error(), "401") {
			t.Errorf("pull with login %q: %v, want refused", login, err)
		}
	}
	m, err := FetchManifest(ctx, base, "private/app", "v1", "cr_temp_user", "issued")
	if want, _ := img.RawManifest(); err != nil || string(m) != string(want) {
		t.Errorf("pull with the issued login: %v", err)
	}
	// Public: no login needed.
	if _, err := FetchManifest(ctx, base, "public/app", "v1", "", ""); err != nil {
		t.Errorf("anonymous pull of a public repository: %v", err)
	}
	// A pull token is for its repository and for pulls only.
	if err := Push(ctx, reg, "private/other", "v1", img); err != nil {
		t.Fatal(err)
	}
	tok, err := exchange(ctx, want, "cr_temp_user", "issued")
	if err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct{ method, path string }{{http.MethodGet, "/v2/private/other/manifests/v1"}, {http.MethodDelete, "/v2/private/app/manifests/v1"}} {
		req, _ := http.NewRequest(tc.method, base+tc.path, nil)
		req.Header.Set("Authorization", "Bearer "+tok)
		if resp, err := http.DefaultClient.Do(req); err != nil || resp.StatusCode != http.StatusUnauthorized {
			t.Errorf("%s %s with private/app's pull token: %v %v", tc.method, tc.path, resp.Status, err)
		}
	}
	// Pushing over the network is refused.
	put, _ := http.NewRequest(http.MethodPost, base+"/v2/private/app/blobs/uploads/", nil)
	if resp, err := http.DefaultClient.Do(put); err != nil || resp.StatusCode != http.StatusUnauthorized {
		t.Errorf("push over the network: %v %v", resp, err)
	}
	var who []string
	for _, r := range reg.Requests() {
		if r.Who != "" {
			who = append(who, r.Method+" "+r.Path+" "+r.Who)
		}
	}
	if len(who) != 3 || who[0] != "GET /auth role drover-node" || who[1] != "GET /v2/private/app/manifests/v1 role drover-node" || who[2] != who[0] {
		t.Errorf("requests allowed for a login: %q", who)
	}
	if !strings.Contains(logBuf.String(), "GET /v2/private/app/manifests/v1 for role drover-node") {
		t.Errorf("the registry's log does not name the login:\n%s", logBuf.String())
	}
}
