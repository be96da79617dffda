package acrapi

import (
	"context"
	"errors"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/drover-os/drover/agent/acrprovider"
	"github.com/drover-os/drover/harness/ecsmeta"
)

type rig struct {
	now  time.Time
	meta *ecsmeta.Server
	api  *Server
	sdk  *acrprovider.SDK
}

func newRig(t *testing.T) *rig {
	r := &rig{now: time.Date(2026, 12, 2, 8, 0, 0, 0, time.UTC)}
	clock := func() time.Time { return r.now }
	inst := ecsmeta.DefaultInstance()
	inst.RAMRole = "drover-node"
	r.meta = ecsmeta.New(inst, ecsmeta.Options{STSLifetime: 2 * time.Hour, Now: clock})
	r.api = New(r.meta, clock)
	r.api.AddInstance(Instance{ID: "cri-harness1", Name: "harness", Region: "cn-hangzhou"})
	srv := httptest.NewServer(r.api)
	t.Cleanup(srv.Close)
	r.sdk = &acrprovider.SDK{Endpoint: srv.URL, Timeout: 5 * time.Second}
	return r
}

// creds are the role's credentials as the provider reads them from the
// metadata service.
func (r *rig) creds(t *testing.T) acrprovider.Credentials {
	t.Helper()
	md := &metaClient{r.meta}
	c, err := acrprovider.RoleCredentials(context.Background(), md)
	if err != nil {
		t.Fatal(err)
	}
	return c
}

// metaClient reads the emulator in-process, as the provider's metadata
// client would over HTTP.
type metaClient struct{ s *ecsmeta.Server }

func (m *metaClient) Get(_ context.Context, key string) (string, error) {
	rec := httptest.NewRecorder()
	m.s.ServeHTTP(rec, httptest.NewRequest("GET", "/latest/meta-data/"+key, nil))
	if rec.Code != 200 {
		return "", errors.New(rec.Result().Status)
	}
	return rec.Body.String(), nil
}

func TestTokensForTheRole(t *testing.T) {
	r := newRig(t)
	ctx := context.Background()
	c := r.creds(t)
	tok, err := r.sdk.EnterpriseToken(ctx, "cn-hangzhou", "cri-harness1", c)
	if err != nil {
		t.Fatal(err)
	}
	// An hour, the STS credentials permitting.
	if tok.Username != "cr_temp_user" || tok.Password == "" || !tok.Expires.Equal(r.now.Add(time.Hour)) {
		t.Errorf("Enterprise login %+v", tok)
	}
	l, ok := r.api.Check(tok.Username, tok.Password)
	if !ok || l.Role != "drover-node" || l.InstanceID != "cri-harness1" || l.AccessKeyID != c.AccessKeyID {
		t.Errorf("Check = %+v, %v", l, ok)
	}
	if _, ok := r.api.Check("someone", tok.Password); ok {
		t.Error("Check accepts another user name")
	}
	ptok, err := r.sdk.PersonalToken(ctx, "cn-hangzhou", c)
	if err != nil {
		t.Fatal(err)
	}
	if _, ok := r.api.Check(ptok.Username, ptok.Password); !ok || ptok.Password == tok.Password {
		t.Errorf("Personal login %+v not issued", ptok)
	}
	id, err := r.sdk.InstanceID(ctx, "cn-hangzhou", "harness", c)
	if err != nil || id != "cri-harness1" {
		t.Errorf("InstanceID = %q, %v", id, err)
	}
	// A login lasts no longer than the STS credentials it was issued for.
	r.now = c.Expiration.Add(-10 * time.Minute)
	short, err := r.sdk.EnterpriseToken(ctx, "cn-hangzhou", "cri-harness1", c)
	if err != nil || !short.Expires.Equal(c.Expiration) {
		t.Errorf("login near the STS expiry: %+v, %v", short, err)
	}
	r.api.LoginLifetime = 6 * time.Minute
	r.now = c.Expiration.Add(-time.Hour)
	six, err := r.sdk.EnterpriseToken(ctx, "cn-hangzhou", "cri-harness1", c)
	if err != nil || !six.Expires.Equal(r.now.Add(6*time.Minute)) {
		t.Errorf("login with LoginLifetime 6m: %+v, %v", six, err)
	}
	r.now = tok.Expires
	if _, ok := r.api.Check(tok.Username, tok.Password); ok {
		t.Error("Check accepts an expired login")
	}
	calls := r.api.Calls()
	if len(calls) != 5 || calls[0] != (Call{Action: "GetAuthorizationToken", Role: "drover-node", InstanceID: "cri-harness1"}) {
		t.Errorf("calls %+v", calls)
	}
}

func TestRefusals(t *testing.T) {
	ctx := context.Background()
	for _, tc := range []struct {
		name string
		edit func(r *rig, c *acrprovider.Credentials)
		id   string
		code string
		is   error
	}{
		{"wrong secret", func(r *rig, c *acrprovider.Credentials) { c.AccessKeySecret += "x" }, "cri-harness1", "SignatureDoesNotMatch", nil},
		{"unknown key", func(r *rig, c *acrprovider.Credentials) { c.AccessKeyID = "STS.unknown" }, "cri-harness1", "InvalidAccessKeyId.NotFound", nil},
		{"another token", func(r *rig, c *acrprovider.Credentials) { c.SecurityToken = "CAISother" }, "cri-harness1", "InvalidSecurityToken.MismatchWithAccessKey", nil},
		{"expired", func(r *rig, c *acrprovider.Credentials) { r.now = c.Expiration }, "cri-harness1", "InvalidSecurityToken.Expired", nil},
		{"denied", func(r *rig, c *acrprovider.Credentials) { r.api.Deny("drover-node", true) }, "cri-harness1", "Forbidden.RAM", acrprovider.ErrAccessDenied},
		{"no such instance", func(r *rig, c *acrprovider.Credentials) {}, "cri-other", "INSTANCE_NOT_EXIST", acrprovider.ErrInstanceNotFound},
	} {
		t.Run(tc.name, func(t *testing.T) {
			r := newRig(t)
			c := r.creds(t)
			tc.edit(r, &c)
			_, err := r.sdk.EnterpriseToken(ctx, "cn-hangzhou", tc.id, c)
			if err == nil || !strings.Contains(err.Error(), tc.code) {
				t.Fatalf("err = %v, want %s", err, tc.code)
			}
			if tc.is != nil && !errors.Is(err, tc.is) {
				t.Errorf("%v is not %v", err, tc.is)
			}
			if calls := r.api.Calls(); len(calls) != 1 || calls[0].Code != tc.code {
				t.Errorf("calls %+v", calls)
			}
			if len(r.api.Logins()) != 0 {
				t.Errorf("a refused call issued %+v", r.api.Logins())
			}
			// Personal Edition checks its signature the same way.
			if tc.name == "wrong secret" {
				if _, err := r.sdk.PersonalToken(ctx, "cn-hangzhou", c); err == nil || !strings.Contains(err.Error(), "SignatureDoesNotMatch") {
					t.Errorf("Personal with a wrong secret: %v", err)
				}
			}
		})
	}
}
