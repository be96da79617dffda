package acrprovider

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net"
	"net/url"
	"strings"
	"time"

	"github.com/aliyun/alibaba-cloud-sdk-go/sdk"
	sdkcreds "github.com/aliyun/alibaba-cloud-sdk-go/sdk/auth/credentials"
	sdkerrors "github.com/aliyun/alibaba-cloud-sdk-go/sdk/errors"
	"github.com/aliyun/alibaba-cloud-sdk-go/services/cr"
	"github.com/aliyun/alibaba-cloud-sdk-go/services/cr_ee"
)

// SDK is ACR through the official alibaba-cloud-sdk-go clients, signed
// with the role's STS credentials.
type SDK struct {
	// Endpoint is the ACR API's host[:port] or URL; http:// selects plain
	// HTTP, and "{region}" in it is replaced by the registry's region (a
	// VPC endpoint: cr-vpc.{region}.aliyuncs.com). Empty: the region's
	// public endpoint, cr.<region>.aliyuncs.com.
	Endpoint string
	// Timeout bounds one API call; 0 is DefaultAPITimeout.
	Timeout time.Duration
}

// DefaultAPITimeout bounds one ACR API call: the kubelet waits for the
// whole plugin run about a minute.
const DefaultAPITimeout = 15 * time.Second

// config is the SDK configuration and the host for region.
func (s *SDK) config(region string) (*sdk.Config, string) {
	timeout := s.Timeout
	if timeout <= 0 {
		timeout = DefaultAPITimeout
	}
	// One retry on a 5xx or a transport failure (the SDK's AutoRetry);
	// the kubelet retries the pull itself.
	cfg := sdk.NewConfig().WithScheme("HTTPS").WithTimeout(timeout).WithAutoRetry(true).WithMaxRetryTime(1)
	ep := s.Endpoint
	if ep == "" {
		return cfg, "cr." + region + ".aliyuncs.com"
	}
	ep = strings.ReplaceAll(ep, "{region}", region)
	if u, err := url.Parse(ep); err == nil && u.Host != "" {
		if u.Scheme == "http" {
			cfg.WithScheme("HTTP")
		}
		return cfg, u.Host
	}
	return cfg, ep
}

func stsCredential(c Credentials) *sdkcreds.StsTokenCredential {
	return sdkcreds.NewStsTokenCredential(c.AccessKeyID, c.AccessKeySecret, c.SecurityToken)
}

// personalTokenBody is ACR Personal Edition's answer to GET /tokens (the
// SDK's response type for this ROA call carries only the raw body).
type personalTokenBody struct {
	Data struct {
		AuthorizationToken string `json:"authorizationToken"`
		TempUserName       string `json:"tempUserName"`
		ExpireDate         int64  `json:"expireDate"` // Unix milliseconds
	} `json:"data"`
	RequestID string `json:"requestId"`
}

// PersonalToken implements ACR.
func (s *SDK) PersonalToken(_ context.Context, region string, c Credentials) (Token, error) {
	cfg, host := s.config(region)
	client, err := cr.NewClientWithOptions(region, cfg, stsCredential(c))
	if err != nil {
		return Token{}, fmt.Errorf("ACR Personal Edition client: %w", sdkError(err))
	}
	client.Domain = host
	req := cr.CreateGetAuthorizationTokenRequest()
	// A ROA request joins its Domain and Port with a colon itself.
	if name, port, err := net.SplitHostPort(host); err == nil {
		req.Domain, req.Port = name, port
	}
	resp, err := client.GetAuthorizationToken(req)
	if err != nil {
		return Token{}, fmt.Errorf("GetAuthorizationToken (cr 2016-06-07) at %s: %w", host, sdkError(err))
	}
	var body personalTokenBody
	if err := json.Unmarshal(resp.GetHttpContentBytes(), &body); err != nil {
		return Token{}, fmt.Errorf("GetAuthorizationToken (cr 2016-06-07) at %s: the answer is not its JSON: %v", host, err)
	}
	return Token{Username: body.Data.TempUserName, Password: body.Data.AuthorizationToken,
		Expires: time.UnixMilli(body.Data.ExpireDate).UTC()}, nil
}

// EnterpriseToken implements ACR.
func (s *SDK) EnterpriseToken(_ context.Context, region, instanceID string, c Credentials) (Token, error) {
	client, host, err := s.eeClient(region, c)
	if err != nil {
		return Token{}, err
	}
	req := cr_ee.CreateGetAuthorizationTokenRequest()
	req.InstanceId = instanceID
	resp, err := client.GetAuthorizationToken(req)
	if err != nil {
		return Token{}, fmt.Errorf("GetAuthorizationToken (cr 2018-12-01) at %s: %w", host, sdkError(err))
	}
	if !resp.GetAuthorizationTokenIsSuccess {
		return Token{}, fmt.Errorf("GetAuthorizationToken (cr 2018-12-01) at %s: %w", host, codeError(resp.Code, 0, resp.RequestId, "IsSuccess false"))
	}
	return Token{Username: resp.TempUsername, Password: resp.AuthorizationToken, Expires: time.UnixMilli(resp.ExpireTime).UTC()}, nil
}

// InstanceID implements ACR: ListInstance filtered by the name, the one
// whose name and region match exactly.
func (s *SDK) InstanceID(_ context.Context, region, name string, c Credentials) (string, error) {
	client, host, err := s.eeClient(region, c)
	if err != nil {
		return "", err
	}
	req := cr_ee.CreateListInstanceRequest()
	req.InstanceName = name
	req.PageSize = "100"
	resp, err := client.ListInstance(req)
	if err != nil {
		return "", fmt.Errorf("ListInstance (cr 2018-12-01) at %s: %w", host, sdkError(err))
	}
	if !resp.ListInstanceIsSuccess {
		return "", fmt.Errorf("ListInstance (cr 2018-12-01) at %s: %w", host, codeError(resp.Code, 0, resp.RequestId, "IsSuccess false"))
	}
	for _, in := range resp.Instances {
		if in.InstanceName == name && (in.RegionId == "" || in.RegionId == region) {
			return in.InstanceId, nil
		}
	}
	return "", fmt.Errorf("%w: ListInstance in %s knows no instance named %q (of %d listed)", ErrInstanceNotFound, region, name, len(resp.Instances))
}

func (s *SDK) eeClient(region string, c Credentials) (*cr_ee.Client, string, error) {
	cfg, host := s.config(region)
	client, err := cr_ee.NewClientWithOptions(region, cfg, stsCredential(c))
	if err != nil {
		return nil, "", fmt.Errorf("ACR Enterprise Edition client: %w", sdkError(err))
	}
	client.Domain = host
	return client, host, nil
}

// sdkError turns an SDK error into one that names the API's code and says
// which kind it is (ErrAccessDenied, ErrInstanceNotFound), without the
// SDK's text: a transport error quotes the request URL, whose query holds
// the security token, and a signature error the string that was signed.
func sdkError(err error) error {
	var se *sdkerrors.ServerError
	if errors.As(err, &se) {
		msg, _, _ := strings.Cut(se.Message(), sdkerrors.MessageContain)
		return codeError(se.ErrorCode(), se.HttpStatus(), se.RequestId(), strings.TrimSpace(msg))
	}
	var ce *sdkerrors.ClientError
	if errors.As(err, &ce) {
		cause := ""
		if o := ce.OriginError(); o != nil {
			var ue *url.Error
			if errors.As(o, &ue) {
				o = ue.Err
			}
			cause = ": " + o.Error()
		}
		return fmt.Errorf("%s: %s%s", ce.ErrorCode(), ce.Message(), cause)
	}
	var ue *url.Error
	if errors.As(err, &ue) {
		return ue.Err
	}
	return err
}

// codeError classifies an API error code: the codes Alibaba Cloud's RAM
// and STS document for a refused caller, and ACR's for a missing instance
// (both tolerantly: by HTTP status as well as by code).
func codeError(code string, status int, requestID, msg string) error {
	desc := code
	if status != 0 {
		desc += fmt.Sprintf(" (HTTP %d)", status)
	}
	if msg != "" {
		desc += ": " + msg
	}
	if requestID != "" {
		desc += " [RequestId " + requestID + "]"
	}
	has := func(parts ...string) bool {
		lc := strings.ToLower(code)
		for _, p := range parts {
			if strings.Contains(lc, strings.ToLower(p)) {
				return true
			}
		}
		return false
	}
	switch {
	case has("InvalidSecurityToken", "InvalidAccessKeyId", "SignatureDoesNotMatch"):
		return fmt.Errorf("the role's STS credentials were refused: %s (the metadata service rotates them; the kubelet asks again on its next pull)", desc)
	case status == 403 || has("Forbidden", "NoPermission", "AccessDenied", "NotAuthorized", "Unauthorized"):
		return fmt.Errorf("%w: %s", ErrAccessDenied, desc)
	case status == 404 || has("NotExist", "NOT_EXIST", "NotFound", "NOT_FOUND"):
		return fmt.Errorf("%w: %s", ErrInstanceNotFound, desc)
	}
	return errors.New(desc)
}
