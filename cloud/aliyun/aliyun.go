// Package aliyun builds the Alibaba Cloud clients drover's publish and
// rollout commands use: the official SDKs (ECS and ESS from
// alibaba-cloud-sdk-go, OSS from alibabacloud-oss-go-sdk-v2), credentials
// from credentials-go's standard chain, and the one retry policy for the
// errors the APIs document as transient (throttling above all).
//
// Endpoints are the SDKs' own unless overridden: a flag, or the environment
// variables DROVER_ECS_ENDPOINT, DROVER_ESS_ENDPOINT and DROVER_OSS_ENDPOINT,
// which is how the tests point the real commands at harness/ecsapi.
package aliyun

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"net/url"
	"os"
	"strings"
	"time"

	"github.com/aliyun/alibaba-cloud-sdk-go/sdk"
	sdkcreds "github.com/aliyun/alibaba-cloud-sdk-go/sdk/auth/credentials"
	sdkerrors "github.com/aliyun/alibaba-cloud-sdk-go/sdk/errors"
	"github.com/aliyun/alibaba-cloud-sdk-go/services/ecs"
	"github.com/aliyun/alibaba-cloud-sdk-go/services/ess"
	"github.com/aliyun/alibabacloud-oss-go-sdk-v2/oss"
	osscreds "github.com/aliyun/alibabacloud-oss-go-sdk-v2/oss/credentials"
	"github.com/aliyun/credentials-go/credentials/providers"

	"github.com/drover-os/drover/internal/retry"
)

// Options selects the region and, for tests and private endpoints, where
// each API is served.
type Options struct {
	Region string
	// ECSEndpoint, ESSEndpoint and OSSEndpoint are host:port or a URL
	// (http:// selects plain HTTP); empty means the environment variable,
	// then the SDK's endpoint for the region.
	ECSEndpoint, ESSEndpoint, OSSEndpoint string
}

// Clients are the three API clients of one region.
type Clients struct {
	Region string
	ECS    *ecs.Client
	ESS    *ess.Client
	OSS    *oss.Client
}

// New builds the clients. Credentials are looked up lazily, on the first
// call, so --dry-run and --help work without any.
func New(o Options) (*Clients, error) {
	if o.Region == "" {
		return nil, errors.New("no region: pass --region (e.g. cn-hangzhou)")
	}
	chain := &chainProvider{inner: providers.NewDefaultCredentialsProvider()}
	c := &Clients{Region: o.Region}

	ecsEP := pick(o.ECSEndpoint, "DROVER_ECS_ENDPOINT")
	cfg, host := rpcConfig(ecsEP)
	ec, err := ecs.NewClientWithOptions(o.Region, cfg, chain)
	if err != nil {
		return nil, fmt.Errorf("ECS client: %w", err)
	}
	ec.Domain = host
	c.ECS = ec

	cfg, host = rpcConfig(pick(o.ESSEndpoint, "DROVER_ESS_ENDPOINT"))
	sc, err := ess.NewClientWithOptions(o.Region, cfg, chain)
	if err != nil {
		return nil, fmt.Errorf("ESS client: %w", err)
	}
	sc.Domain = host
	c.ESS = sc

	// The SDK's upload CRC check is off: publish checks each upload end
	// to end instead (the object's x-oss-hash-crc64ecma against the
	// file's CRC-64, publish.upload). The SDK's check combines the CRCs
	// of the parts one run sent, so it failed ("client 0") a resumed upload
	// that had no part left to send (uploader.go, combineCRC, v1.6.1).
	oc := oss.LoadDefaultConfig().WithRegion(o.Region).
		WithCredentialsProvider(osscreds.CredentialsProviderFunc(chain.oss)).
		WithDisableUploadCRC64Check(true)
	if ep := pick(o.OSSEndpoint, "DROVER_OSS_ENDPOINT"); ep != "" {
		u, plain := endpoint(ep)
		// A private endpoint (the emulator) has no bucket subdomains.
		oc = oc.WithEndpoint(u).WithUsePathStyle(true).WithDisableSSL(plain)
	}
	c.OSS = oss.NewClient(oc)
	return c, nil
}

func pick(flag, env string) string {
	if flag != "" {
		return flag
	}
	return os.Getenv(env)
}

// rpcConfig is the SDK configuration for an RPC endpoint: HTTPS unless the
// endpoint says http://, and the host the client's Domain overrides (empty:
// the SDK resolves the region's endpoint).
func rpcConfig(ep string) (*sdk.Config, string) {
	cfg := sdk.NewConfig().WithScheme("HTTPS").WithTimeout(60 * time.Second)
	if ep == "" {
		return cfg, ""
	}
	host, plain := endpoint(ep)
	if plain {
		cfg.WithScheme("HTTP")
	}
	return cfg, host
}

// endpoint splits an endpoint flag into host[:port] and whether it is
// plain HTTP.
func endpoint(ep string) (string, bool) {
	if u, err := url.Parse(ep); err == nil && u.Host != "" {
		return u.Host, u.Scheme == "http"
	}
	return ep, false
}

// chainProvider adapts credentials-go's default chain (environment,
// ~/.aliyun/config.json, ~/.alibabacloud/credentials, the ECS RAM role) to
// both SDKs, so one lookup order serves ECS, ESS and OSS.
type chainProvider struct{ inner providers.CredentialsProvider }

func (p *chainProvider) GetCredentials() (*sdkcreds.Credentials, error) {
	c, err := p.inner.GetCredentials()
	if err != nil {
		return nil, credsErr(err)
	}
	return &sdkcreds.Credentials{AccessKeyId: c.AccessKeyId, AccessKeySecret: c.AccessKeySecret,
		SecurityToken: c.SecurityToken, ProviderName: c.ProviderName}, nil
}

func (p *chainProvider) GetProviderName() string { return "drover/credentials-go-default" }

func (p *chainProvider) oss(context.Context) (osscreds.Credentials, error) {
	c, err := p.inner.GetCredentials()
	if err != nil {
		return osscreds.Credentials{}, credsErr(err)
	}
	return osscreds.Credentials{AccessKeyID: c.AccessKeyId, AccessKeySecret: c.AccessKeySecret, SecurityToken: c.SecurityToken}, nil
}

func credsErr(err error) error {
	return fmt.Errorf("no Alibaba Cloud credentials: set ALIBABA_CLOUD_ACCESS_KEY_ID and ALIBABA_CLOUD_ACCESS_KEY_SECRET, "+
		"configure a profile with `aliyun configure` (~/.aliyun/config.json), or run on an ECS instance with a RAM role: %w", err)
}

// Code is the API's error code of err ("" when err is not an API error).
func Code(err error) string {
	var se *sdkerrors.ServerError
	if errors.As(err, &se) {
		return se.ErrorCode()
	}
	var oe *oss.ServiceError
	if errors.As(err, &oe) {
		return oe.Code
	}
	return ""
}

// IsCode reports whether err is an API error with one of codes.
func IsCode(err error, codes ...string) bool {
	c := Code(err)
	for _, x := range codes {
		if c != "" && c == x {
			return true
		}
	}
	return false
}

// transient are the documented codes worth retrying: throttling (per user,
// per API, per region) and the service's own passing failures.
func transient(err error) bool {
	c := Code(err)
	return strings.HasPrefix(c, "Throttling") || c == "ServiceUnavailable" || c == "InternalError" ||
		c == "UnknownError" || c == "OperationConflict" || strings.HasPrefix(c, "IncorrectInstanceStatus.Initializing")
}

// Policy is the Alibaba Cloud APIs' retry policy: the documented
// transient errors retried 8 times, 1 s doubling to 30 s (1, 2, 4, 8, 16,
// 30, 30, 30: two minutes in all, past a per-second throttling window).
func Policy() retry.Policy {
	return retry.Policy{Base: time.Second, Max: 30 * time.Second, Retries: 8,
		Retryable: func(err error) (bool, time.Duration) { return transient(err), 0 }}
}

// Retry calls fn under Policy: until it succeeds, fails with a
// non-transient error, the retries run out or ctx ends. what names the
// call in the error.
func Retry(ctx context.Context, what string, fn func() error) error {
	return RetryWith(ctx, Policy(), what, fn)
}

// RetryWith is Retry under another policy (tests pass a fast one).
func RetryWith(ctx context.Context, p retry.Policy, what string, fn func() error) error {
	err := p.Do(ctx, fn, nil)
	var ex *retry.Exhausted
	if errors.As(err, &ex) {
		err = ex.Err
	}
	if err != nil {
		return fmt.Errorf("%s: %w", what, err)
	}
	return nil
}

// ClientToken returns a new idempotence token for one call, kept across its
// retries: ECS and ESS act once on the same token with the same parameters
// and answer the first call's result again (ECS, "How to ensure
// idempotence"), so a retry after an answer lost on the way back does not
// act twice. 32 hex characters: ASCII, within the 64 the APIs take.
func ClientToken() string {
	b := make([]byte, 16)
	_, _ = rand.Read(b)
	return hex.EncodeToString(b)
}
