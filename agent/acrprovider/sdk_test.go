package acrprovider

import (
	"context"
	"errors"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"
	"time"
)

// acrAPI answers as ACR's API documents it: Enterprise (RPC, Action in the
// query) and Personal (ROA, GET /tokens), or a documented error.
type acrAPI struct {
	mu       sync.Mutex
	requests []*http.Request
	status   int    // != 0: answer every request with this error status
	code     string // and this Code
}

func (a *acrAPI) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	r.ParseForm()
	a.mu.Lock()
	a.requests = append(a.requests, r)
	a.mu.Unlock()
	w.Header().Set("Content-Type", "application/json")
	if a.status != 0 {
		w.WriteHeader(a.status)
		w.Write([]byte(`{"Code":"` + a.code + `","Message":"refused; server string to sign is: POST&%2F&SecurityToken%3D` + testSTS + `","RequestId":"REQ-9"}`))
		return
	}
	switch {
	case r.URL.Path == "/tokens" && r.Method == http.MethodGet:
		w.Write([]byte(`{"data":{"authorizationToken":"personal-pw","tempUserName":"cr_temp_user","expireDate":1796198400000},"requestId":"REQ-P"}`))
	case r.Form.Get("Action") == "GetAuthorizationToken":
		w.Write([]byte(`{"RequestId":"REQ-E","ExpireTime":1796198400000,"Code":"success","IsSuccess":true,"TempUsername":"temp_user_cr","AuthorizationToken":"ee-pw"}`))
	case r.Form.Get("Action") == "ListInstance":
		w.Write([]byte(`{"RequestId":"REQ-L","IsSuccess":true,"Code":"success","PageNo":1,"PageSize":100,"TotalCount":2,"Instances":[` +
			`{"InstanceId":"cri-other","InstanceName":"myreg-old","RegionId":"cn-hangzhou"},` +
			`{"InstanceId":"cri-mine","InstanceName":"myreg","RegionId":"cn-hangzhou"}]}`))
	default:
		http.NotFound(w, r)
	}
}

var sdkCreds = Credentials{Role: testRole, AccessKeyID: "STS.akid", AccessKeySecret: testSecret, SecurityToken: testSTS}

func TestSDKAgainstDocumentedAnswers(t *testing.T) {
	api := &acrAPI{}
	srv := httptest.NewServer(api)
	defer srv.Close()
	s := &SDK{Endpoint: srv.URL, Timeout: 5 * time.Second}
	ctx := context.Background()
	expires := time.UnixMilli(1796198400000).UTC()

	tok, err := s.PersonalToken(ctx, "cn-hangzhou", sdkCreds)
	if err != nil || tok != (Token{Username: "cr_temp_user", Password: "personal-pw", Expires: expires}) {
		t.Errorf("PersonalToken = %+v, %v", tok, err)
	}
	tok, err = s.EnterpriseToken(ctx, "cn-hangzhou", "cri-mine", sdkCreds)
	if err != nil || tok != (Token{Username: "temp_user_cr", Password: "ee-pw", Expires: expires}) {
		t.Errorf("EnterpriseToken = %+v, %v", tok, err)
	}
	id, err := s.InstanceID(ctx, "cn-hangzhou", "myreg", sdkCreds)
	if err != nil || id != "cri-mine" {
		t.Errorf("InstanceID = %q, %v", id, err)
	}
	if _, err := s.InstanceID(ctx, "cn-hangzhou", "absent", sdkCreds); !errors.Is(err, ErrInstanceNotFound) {
		t.Errorf("InstanceID of an absent name: %v", err)
	}

	// What went on the wire: the role's STS credentials, signed; the
	// instance ID and the region for Enterprise.
	if len(api.requests) != 4 {
		t.Fatalf("%d requests, want 4", len(api.requests))
	}
	personal, ee := api.requests[0], api.requests[1]
	if personal.Header.Get("x-acs-security-token") != testSTS || !strings.Contains(personal.Header.Get("Authorization"), "acs STS.akid:") {
		t.Errorf("Personal request not signed with the STS credentials: %v", personal.Header)
	}
	if ee.Form.Get("SecurityToken") != testSTS || ee.Form.Get("AccessKeyId") != "STS.akid" || ee.Form.Get("Signature") == "" ||
		ee.Form.Get("InstanceId") != "cri-mine" || ee.Form.Get("RegionId") != "cn-hangzhou" || ee.Form.Get("Version") != "2018-12-01" {
		t.Errorf("Enterprise request: %v", ee.Form)
	}
}

func TestSDKErrors(t *testing.T) {
	for _, tc := range []struct {
		status int
		code   string
		is     error
	}{
		{403, "Forbidden.RAM", ErrAccessDenied},
		{400, "NoPermission", ErrAccessDenied},
		{404, "INSTANCE_NOT_EXIST", ErrInstanceNotFound},
		{400, "InvalidSecurityToken.Expired", nil},
	} {
		api := &acrAPI{status: tc.status, code: tc.code}
		srv := httptest.NewServer(api)
		s := &SDK{Endpoint: srv.URL, Timeout: 5 * time.Second}
		_, err := s.EnterpriseToken(context.Background(), "cn-hangzhou", "cri-mine", sdkCreds)
		srv.Close()
		if err == nil {
			t.Fatalf("%s: no error", tc.code)
		}
		if tc.is != nil && !errors.Is(err, tc.is) {
			t.Errorf("%s: %q is not %v", tc.code, err, tc.is)
		}
		if tc.is == nil && (errors.Is(err, ErrAccessDenied) || errors.Is(err, ErrInstanceNotFound) || !strings.Contains(err.Error(), "STS credentials were refused")) {
			t.Errorf("%s: %q", tc.code, err)
		}
		if !strings.Contains(err.Error(), tc.code) || !strings.Contains(err.Error(), "REQ-9") {
			t.Errorf("%s: %q does not name the code and request", tc.code, err)
		}
		if strings.Contains(err.Error(), testSTS) || strings.Contains(err.Error(), "string to sign") {
			t.Errorf("%s: error quotes the signed string: %q", tc.code, err)
		}
	}
}

// A transport failure's error names no URL: the RPC query carries the
// security token.
func TestSDKTransportErrorHasNoURL(t *testing.T) {
	srv := httptest.NewServer(http.NotFoundHandler())
	url := srv.URL
	srv.Close()
	s := &SDK{Endpoint: url, Timeout: 2 * time.Second}
	_, err := s.EnterpriseToken(context.Background(), "cn-hangzhou", "cri-mine", sdkCreds)
	if err == nil {
		t.Fatal("no error from a closed endpoint")
	}
	if strings.Contains(err.Error(), testSTS) || strings.Contains(err.Error(), "SecurityToken") {
		t.Errorf("transport error quotes the request: %q", err)
	}
}

func TestSDKEndpoint(t *testing.T) {
	for _, tc := range []struct{ ep, host, scheme string }{
		{"", "cr.cn-shanghai.aliyuncs.com", "HTTPS"},
		{"cr-vpc.{region}.aliyuncs.com", "cr-vpc.cn-shanghai.aliyuncs.com", "HTTPS"},
		{"https://cr-vpc.{region}.aliyuncs.com", "cr-vpc.cn-shanghai.aliyuncs.com", "HTTPS"},
		{"http://100.64.0.2:8080", "100.64.0.2:8080", "HTTP"},
	} {
		cfg, host := (&SDK{Endpoint: tc.ep}).config("cn-shanghai")
		if host != tc.host || cfg.Scheme != tc.scheme {
			t.Errorf("endpoint %q: %s %s, want %s %s", tc.ep, cfg.Scheme, host, tc.scheme, tc.host)
		}
	}
}
