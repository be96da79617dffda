package acrprovider

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/drover-os/drover/agent/credstatus"
	"github.com/drover-os/drover/agent/provider"
	credv1 "k8s.io/kubelet/pkg/apis/credentialprovider/v1"
)

var now = time.Date(2026, 12, 2, 8, 0, 0, 0, time.UTC)

const (
	testSecret = "stsSecretValue0123456789"
	testSTS    = "CAISstsTokenValue0123456789"
	testRole   = "drover-node"
)

// fakeMetadata serves meta-data keys; a missing key is the client's 404.
type fakeMetadata map[string]string

func (m fakeMetadata) Get(_ context.Context, key string) (string, error) {
	v, ok := m[key]
	if !ok {
		return "", fmt.Errorf("metadata GET %s: %w", key, &provider.StatusError{Code: http.StatusNotFound, Status: "404 Not Found"})
	}
	return v, nil
}

func roleMetadata() fakeMetadata {
	creds, _ := json.Marshal(map[string]string{"Code": "Success", "AccessKeyId": "STS.akid", "AccessKeySecret": testSecret,
		"SecurityToken": testSTS, "Expiration": "2026-12-02T14:00:00Z", "LastUpdated": "2026-12-02T08:00:00Z"})
	return fakeMetadata{RoleKey: testRole, RoleKey + testRole: string(creds)}
}

// call is one call the fake ACR received.
type call struct{ op, region, arg string }

type fakeACR struct {
	calls []call
	creds []Credentials
	tok   Token
	err   error             // returned by the token calls
	ids   map[string]string // instance name → ID
}

func (f *fakeACR) PersonalToken(_ context.Context, region string, c Credentials) (Token, error) {
	f.calls = append(f.calls, call{"personal", region, ""})
	f.creds = append(f.creds, c)
	return f.tok, f.err
}

func (f *fakeACR) EnterpriseToken(_ context.Context, region, id string, c Credentials) (Token, error) {
	f.calls = append(f.calls, call{"enterprise", region, id})
	f.creds = append(f.creds, c)
	return f.tok, f.err
}

func (f *fakeACR) InstanceID(_ context.Context, region, name string, c Credentials) (string, error) {
	f.calls = append(f.calls, call{"list", region, name})
	if id, ok := f.ids[name]; ok {
		return id, nil
	}
	return "", fmt.Errorf("%w: no instance named %q", ErrInstanceNotFound, name)
}

func request(image string) credv1.CredentialProviderRequest {
	var r credv1.CredentialProviderRequest
	r.APIVersion, r.Kind, r.Image = APIVersion, RequestKind, image
	return r
}

func TestHandleMatches(t *testing.T) {
	instances := []Instance{
		{Domain: "images.example.com", ID: "cri-custom0001", Region: "cn-shanghai"},
		{Domain: "known-registry.cn-hangzhou.cr.aliyuncs.com", ID: "cri-known00001", Region: "cn-hangzhou"},
		{Domain: "100.64.0.2:5000", ID: "cri-harness001", Region: "cn-hangzhou"},
	}
	for _, tc := range []struct {
		image   string
		wantKey string // "" = no credentials
		calls   []call
	}{
		{"registry.cn-hangzhou.aliyuncs.com/ns/app:v1", "registry.cn-hangzhou.aliyuncs.com",
			[]call{{"personal", "cn-hangzhou", ""}}},
		{"registry-vpc.cn-beijing.aliyuncs.com/ns/app@sha256:0123", "registry-vpc.cn-beijing.aliyuncs.com",
			[]call{{"personal", "cn-beijing", ""}}},
		{"myreg-registry-vpc.cn-hangzhou.cr.aliyuncs.com/ns/app:v1", "myreg-registry-vpc.cn-hangzhou.cr.aliyuncs.com",
			[]call{{"list", "cn-hangzhou", "myreg"}, {"enterprise", "cn-hangzhou", "cri-looked0001"}}},
		// A configured ID saves the lookup.
		{"known-registry.cn-hangzhou.cr.aliyuncs.com/ns/app", "known-registry.cn-hangzhou.cr.aliyuncs.com",
			[]call{{"enterprise", "cn-hangzhou", "cri-known00001"}}},
		{"images.example.com/team/app:v2", "images.example.com",
			[]call{{"enterprise", "cn-shanghai", "cri-custom0001"}}},
		{"100.64.0.2:5000/drover/private:v1", "100.64.0.2:5000",
			[]call{{"enterprise", "cn-hangzhou", "cri-harness001"}}},
		// Not ACR: no credentials, no call, nothing cached.
		{"docker.io/library/nginx:1", "", nil},
		{"nginx", "", nil},
		{"other.example.com/app", "", nil},
		{"100.64.0.2:5001/drover/private:v1", "", nil},
	} {
		t.Run(tc.image, func(t *testing.T) {
			f := &fakeACR{tok: Token{Username: "cr_temp_user", Password: "issued-password", Expires: now.Add(time.Hour)},
				ids: map[string]string{"myreg": "cri-looked0001"}}
			p := &Provider{Instances: instances, Metadata: roleMetadata(), ACR: f, Now: func() time.Time { return now }}
			resp, err := p.Handle(context.Background(), request(tc.image))
			if err != nil {
				t.Fatal(err)
			}
			if resp.APIVersion != APIVersion || resp.Kind != ResponseKind || resp.CacheKeyType != credv1.RegistryPluginCacheKeyType {
				t.Errorf("response type %s %s, cache key %q", resp.APIVersion, resp.Kind, resp.CacheKeyType)
			}
			if fmt.Sprint(f.calls) != fmt.Sprint(tc.calls) {
				t.Errorf("ACR calls %v, want %v", f.calls, tc.calls)
			}
			if tc.wantKey == "" {
				if resp.Auth != nil || resp.CacheDuration == nil || resp.CacheDuration.Duration != 0 {
					t.Errorf("no ACR registry: auth %v, cache %v; want none, not cached", resp.Auth, resp.CacheDuration)
				}
				return
			}
			want := map[string]credv1.AuthConfig{tc.wantKey: {Username: "cr_temp_user", Password: "issued-password"}}
			if fmt.Sprint(resp.Auth) != fmt.Sprint(want) {
				t.Errorf("auth %v, want %v", resp.Auth, want)
			}
			for _, c := range f.creds {
				if c.Role != testRole || c.AccessKeyID != "STS.akid" || c.AccessKeySecret != testSecret || c.SecurityToken != testSTS {
					t.Errorf("ACR called with credentials %+v, not the role's", c)
				}
			}
		})
	}
}

func TestCacheDurationFromExpiry(t *testing.T) {
	for _, tc := range []struct {
		left time.Duration
		want time.Duration
	}{
		{time.Hour, 55 * time.Minute},
		{6 * time.Hour, 6*time.Hour - CacheMargin},
		{CacheMargin + 1500*time.Millisecond, time.Second},
		{CacheMargin, 0},
		{time.Minute, 0},
	} {
		f := &fakeACR{tok: Token{Username: "u", Password: "p", Expires: now.Add(tc.left)}}
		p := &Provider{Metadata: roleMetadata(), ACR: f, Now: func() time.Time { return now }}
		resp, err := p.Handle(context.Background(), request("registry.cn-hangzhou.aliyuncs.com/a/b"))
		if err != nil {
			t.Fatal(err)
		}
		if resp.CacheDuration == nil || resp.CacheDuration.Duration != tc.want {
			t.Errorf("token valid for %s: cacheDuration %v, want %s", tc.left, resp.CacheDuration, tc.want)
		}
	}
	// A token already expired is the node's clock, not something to cache.
	f := &fakeACR{tok: Token{Username: "u", Password: "p", Expires: now.Add(-time.Second)}}
	p := &Provider{Metadata: roleMetadata(), ACR: f, Now: func() time.Time { return now }}
	if _, err := p.Handle(context.Background(), request("registry.cn-hangzhou.aliyuncs.com/a/b")); err == nil ||
		!strings.Contains(err.Error(), "check the node's clock") {
		t.Errorf("expired token: err = %v", err)
	}
}

func TestHandleErrors(t *testing.T) {
	noRole := fakeMetadata{}
	detached := fakeMetadata{RoleKey: testRole}
	badCode := roleMetadata()
	badCode[RoleKey+testRole] = `{"Code":"Failed"}`
	missing := roleMetadata()
	missing[RoleKey+testRole] = `{"Code":"Success","AccessKeyId":"STS.akid","AccessKeySecret":"` + testSecret + `"}`
	garbled := roleMetadata()
	garbled[RoleKey+testRole] = `{"AccessKeySecret":"` + testSecret + `",`
	for _, tc := range []struct {
		name  string
		md    Metadata
		acr   *fakeACR
		image string
		is    error
		say   []string
	}{
		{"no role", noRole, &fakeACR{}, "registry.cn-hangzhou.aliyuncs.com/a/b", ErrNoRole,
			[]string{"registry.cn-hangzhou.aliyuncs.com", "no RAM role attached", "attach a RAM role"}},
		{"role detached", detached, &fakeACR{}, "registry.cn-hangzhou.aliyuncs.com/a/b", ErrNoRole,
			[]string{"the role was detached", testRole}},
		{"code not success", badCode, &fakeACR{}, "registry.cn-hangzhou.aliyuncs.com/a/b", nil,
			[]string{`Code "Failed"`}},
		{"fields missing", missing, &fakeACR{}, "registry.cn-hangzhou.aliyuncs.com/a/b", nil,
			[]string{"lacks Expiration, SecurityToken"}},
		{"not JSON", garbled, &fakeACR{}, "registry.cn-hangzhou.aliyuncs.com/a/b", nil,
			[]string{"is not the credentials JSON"}},
		{"access denied", roleMetadata(), &fakeACR{err: codeError("Forbidden.RAM", 403, "REQ-1", "User not authorized")},
			"registry.cn-hangzhou.aliyuncs.com/a/b", ErrAccessDenied,
			[]string{"Forbidden.RAM", "REQ-1", `RAM role "drover-node"`, "cr:GetAuthorizationToken"}},
		{"instance not found", roleMetadata(), &fakeACR{}, "gone-registry.cn-hangzhou.cr.aliyuncs.com/a/b", ErrInstanceNotFound,
			[]string{`instance "gone"`, "registries.acr.instances", "check the registry domain"}},
		{"instance ID not found", roleMetadata(), &fakeACR{err: codeError("INSTANCE_NOT_EXIST", 404, "REQ-2", "")},
			"images.example.com/a/b", ErrInstanceNotFound, []string{"cri-custom0001", "INSTANCE_NOT_EXIST"}},
		// An error that quotes a secret (the SDK's string to sign) is masked.
		{"secret masked", roleMetadata(), &fakeACR{err: errors.New("SignatureDoesNotMatch: SecurityToken=" + testSTS + "&x=" + testSecret)},
			"registry.cn-hangzhou.aliyuncs.com/a/b", nil, []string{"SecurityToken=<redacted>&x=<redacted>"}},
		{"empty token", roleMetadata(), &fakeACR{tok: Token{Expires: now.Add(time.Hour)}},
			"registry.cn-hangzhou.aliyuncs.com/a/b", nil, []string{"without a user name or password"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			p := &Provider{Instances: []Instance{{Domain: "images.example.com", ID: "cri-custom0001", Region: "cn-shanghai"}},
				Metadata: tc.md, ACR: tc.acr, Now: func() time.Time { return now }}
			resp, err := p.Handle(context.Background(), request(tc.image))
			if err == nil {
				t.Fatalf("no error; response %+v", resp)
			}
			if tc.is != nil && !errors.Is(err, tc.is) {
				t.Errorf("error %q is not %v", err, tc.is)
			}
			for _, s := range tc.say {
				if !strings.Contains(err.Error(), s) {
					t.Errorf("error %q does not say %q", err, s)
				}
			}
			for _, secret := range []string{testSecret, testSTS} {
				if strings.Contains(err.Error(), secret) {
					t.Errorf("error %q holds a secret", err)
				}
			}
		})
	}
}

func TestReadRequest(t *testing.T) {
	good := `{"apiVersion":"credentialprovider.kubelet.k8s.io/v1","kind":"CredentialProviderRequest","image":"registry.cn-hangzhou.aliyuncs.com/a/b:v1","futureField":1}`
	req, err := ReadRequest(strings.NewReader(good))
	if err != nil || req.Image != "registry.cn-hangzhou.aliyuncs.com/a/b:v1" {
		t.Fatalf("ReadRequest = %+v, %v", req, err)
	}
	for name, in := range map[string]string{
		"v1alpha1": `{"apiVersion":"credentialprovider.kubelet.k8s.io/v1alpha1","kind":"CredentialProviderRequest","image":"a/b"}`,
		"kind":     `{"apiVersion":"credentialprovider.kubelet.k8s.io/v1","kind":"CredentialProviderResponse","image":"a/b"}`,
		"no image": `{"apiVersion":"credentialprovider.kubelet.k8s.io/v1","kind":"CredentialProviderRequest"}`,
		"not JSON": `image: a/b`,
		"too big":  strings.Repeat(" ", maxRequest+1),
	} {
		if _, err := ReadRequest(strings.NewReader(in)); !errors.Is(err, ErrBadRequest) {
			t.Errorf("%s: err = %v, want ErrBadRequest", name, err)
		}
	}
}

func TestWriteResponseIsTheProtocolsJSON(t *testing.T) {
	f := &fakeACR{tok: Token{Username: "cr_temp_user", Password: "pw", Expires: now.Add(time.Hour)}}
	p := &Provider{Metadata: roleMetadata(), ACR: f, Now: func() time.Time { return now }}
	resp, err := p.Handle(context.Background(), request("registry.cn-hangzhou.aliyuncs.com/a/b"))
	if err != nil {
		t.Fatal(err)
	}
	var buf bytes.Buffer
	if err := WriteResponse(&buf, resp); err != nil {
		t.Fatal(err)
	}
	want := `{"kind":"CredentialProviderResponse","apiVersion":"credentialprovider.kubelet.k8s.io/v1","cacheKeyType":"Registry",` +
		`"cacheDuration":"55m0s","auth":{"registry.cn-hangzhou.aliyuncs.com":{"username":"cr_temp_user","password":"pw"}}}` + "\n"
	if buf.String() != want {
		t.Errorf("response\n%s\nwant\n%s", buf.String(), want)
	}
}

func TestClass(t *testing.T) {
	for err, want := range map[error]string{
		fmt.Errorf("credentials for x: %w", ErrNoRole):                    credstatus.NoRAMRole,
		masked(fmt.Errorf("y: %w", ErrAccessDenied), nil):                 credstatus.AccessDenied,
		fmt.Errorf("z: %w", fmt.Errorf("w: %w", ErrInstanceNotFound)):     credstatus.InstanceNotFound,
		errors.New("reading the instance's RAM role: connection refused"): credstatus.Failed,
	} {
		if got := Class(err); got != want {
			t.Errorf("Class(%v) = %q, want %q", err, got, want)
		}
	}
}
