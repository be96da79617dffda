// Package acrprovider is drover-acr-credential-provider's logic: the
// kubelet's image credential provider protocol
// (credentialprovider.kubelet.k8s.io/v1) answered with a temporary ACR
// login issued for the instance's RAM role.
//
// For each request the kubelet sends (a CredentialProviderRequest on
// stdin), the provider finds which ACR registry the image's host is (a
// configured Enterprise instance, else an ACR default domain: package
// acr), takes the RAM role's STS credentials from the ECS metadata service
// (agent/provider's hardened-mode client: one metadata client for the
// whole node), asks ACR's GetAuthorizationToken for a temporary user and
// password (the official SDK: cr for Personal, cr_ee for Enterprise), and
// answers with them for that registry, cached by the kubelet until shortly
// before the token expires.
//
// Nothing is written to disk; credentials live in memory for one request.
// Errors say what to do (attach a role, grant cr:GetAuthorizationToken,
// configure the instance ID) and never carry a credential: every error
// leaving Handle has the role's secrets, token and the issued password
// masked.
package acrprovider

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"strings"
	"time"

	"github.com/drover-os/drover/agent/acr"
	"github.com/drover-os/drover/agent/credstatus"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	credv1 "k8s.io/kubelet/pkg/apis/credentialprovider/v1"
)

// The protocol's type names.
const (
	APIVersion   = "credentialprovider.kubelet.k8s.io/v1"
	RequestKind  = "CredentialProviderRequest"
	ResponseKind = "CredentialProviderResponse"
)

// Instance is a configured ACR Enterprise instance: a domain it serves
// (a custom domain, or a default one whose instance ID is known), its ID
// and region.
type Instance struct {
	Domain string // host[:port], lower case
	ID     string // cri-…
	Region string
}

// Credentials are the STS credentials of the instance's RAM role.
type Credentials struct {
	Role                                        string
	AccessKeyID, AccessKeySecret, SecurityToken string
	Expiration                                  time.Time
}

// Token is a temporary ACR login.
type Token struct {
	Username, Password string
	Expires            time.Time
}

// ACR issues tokens; SDK is the implementation that calls Alibaba Cloud.
type ACR interface {
	// PersonalToken calls GetAuthorizationToken of ACR Personal Edition.
	PersonalToken(ctx context.Context, region string, c Credentials) (Token, error)
	// EnterpriseToken calls GetAuthorizationToken of ACR Enterprise
	// Edition for one instance.
	EnterpriseToken(ctx context.Context, region, instanceID string, c Credentials) (Token, error)
	// InstanceID finds the ID of the Enterprise instance named name in
	// region (ListInstance); an error matching ErrInstanceNotFound when
	// there is none.
	InstanceID(ctx context.Context, region, name string, c Credentials) (string, error)
}

// Metadata reads ECS meta-data keys; *provider.ECSClient implements it.
type Metadata interface {
	Get(ctx context.Context, key string) (string, error)
}

// Errors a caller (and a test) can tell apart with errors.Is.
var (
	ErrNoRole           = errors.New("the instance has no RAM role attached")
	ErrAccessDenied     = errors.New("access denied")
	ErrInstanceNotFound = errors.New("ACR instance not found")
	ErrBadRequest       = errors.New("not a CredentialProviderRequest")
)

// Provider answers credential requests.
type Provider struct {
	Instances []Instance
	Metadata  Metadata
	ACR       ACR
	// Now is the clock; nil is time.Now.
	Now func() time.Time
	// Log receives one line per decision worth a line in the kubelet's
	// log (stderr); nil discards. Never a credential.
	Log func(string)
}

// CacheMargin is how long before the token's expiry the kubelet stops
// using it: a pull that starts just before expiry still authenticates.
const CacheMargin = 5 * time.Minute

// maxRequest bounds what is read from stdin: a request holds an image
// reference and, at most, a service account token.
const maxRequest = 1 << 20

// ReadRequest decodes the kubelet's request. Fields this version does not
// know are ignored (a newer kubelet may send more); apiVersion and kind
// must be this protocol's.
func ReadRequest(r io.Reader) (credv1.CredentialProviderRequest, error) {
	var req credv1.CredentialProviderRequest
	data, err := io.ReadAll(io.LimitReader(r, maxRequest+1))
	if err != nil {
		return req, fmt.Errorf("reading the request from stdin: %w", err)
	}
	if len(data) > maxRequest {
		return req, fmt.Errorf("%w: larger than %d bytes", ErrBadRequest, maxRequest)
	}
	if err := json.Unmarshal(data, &req); err != nil {
		return req, fmt.Errorf("%w: %v (the kubelet writes one JSON object to stdin)", ErrBadRequest, err)
	}
	if req.APIVersion != APIVersion || req.Kind != RequestKind {
		return req, fmt.Errorf("%w: apiVersion %q kind %q; this provider speaks %s %s: set apiVersion: %s in the kubelet's CredentialProviderConfig",
			ErrBadRequest, req.APIVersion, req.Kind, APIVersion, RequestKind, APIVersion)
	}
	if req.Image == "" {
		return req, fmt.Errorf("%w: no image", ErrBadRequest)
	}
	return req, nil
}

// WriteResponse encodes resp for the kubelet.
func WriteResponse(w io.Writer, resp *credv1.CredentialProviderResponse) error {
	if err := json.NewEncoder(w).Encode(resp); err != nil {
		return fmt.Errorf("writing the response to stdout: %w", err)
	}
	return nil
}

// Handle answers one request. An image whose host is no ACR registry it
// knows gets an answer without credentials (the protocol's "none here"),
// so the kubelet pulls it as it would without this provider.
func (p *Provider) Handle(ctx context.Context, req credv1.CredentialProviderRequest) (*credv1.CredentialProviderResponse, error) {
	resp := &credv1.CredentialProviderResponse{
		TypeMeta:     metav1.TypeMeta{APIVersion: APIVersion, Kind: ResponseKind},
		CacheKeyType: credv1.RegistryPluginCacheKeyType,
	}
	host := acr.ImageHost(req.Image)
	reg, ok := p.registry(host)
	if !ok {
		p.logf("%s: not an ACR registry domain and no configured instance: no credentials", host)
		resp.CacheDuration = &metav1.Duration{}
		return resp, nil
	}
	var secrets []string
	tok, err := p.token(ctx, reg, &secrets)
	if err != nil {
		return nil, masked(fmt.Errorf("credentials for %s: %w", host, err), secrets)
	}
	now := p.now()
	if !tok.Expires.After(now) {
		return nil, fmt.Errorf("credentials for %s: ACR issued a token that expired at %s, before now (%s): check the node's clock (timesyncd)",
			host, tok.Expires.UTC().Format(time.RFC3339), now.UTC().Format(time.RFC3339))
	}
	resp.CacheDuration = &metav1.Duration{Duration: CacheDuration(now, tok.Expires)}
	resp.Auth = map[string]credv1.AuthConfig{host: {Username: tok.Username, Password: tok.Password}}
	p.logf("%s: ACR %s token for %s, valid until %s", host, reg.Edition, editionObject(reg), tok.Expires.UTC().Format(time.RFC3339))
	return resp, nil
}

// CacheDuration is how long the kubelet may reuse a token that expires at
// expires: until CacheMargin before then, and not at all (0) when less is
// left.
func CacheDuration(now, expires time.Time) time.Duration {
	d := expires.Sub(now) - CacheMargin
	if d < 0 {
		return 0
	}
	return d.Truncate(time.Second)
}

// registry is the ACR registry host is: a configured instance first (a
// custom domain, or an ID for a default one), else a default domain.
func (p *Provider) registry(host string) (acr.Registry, bool) {
	for _, in := range p.Instances {
		if strings.EqualFold(in.Domain, host) {
			return acr.Registry{Host: host, Edition: acr.Enterprise, Region: in.Region, InstanceID: in.ID}, true
		}
	}
	return acr.Parse(host)
}

func (p *Provider) token(ctx context.Context, reg acr.Registry, secrets *[]string) (Token, error) {
	creds, err := RoleCredentials(ctx, p.Metadata)
	*secrets = append(*secrets, creds.AccessKeySecret, creds.SecurityToken)
	if err != nil {
		return Token{}, err
	}
	var tok Token
	switch reg.Edition {
	case acr.Personal:
		tok, err = p.ACR.PersonalToken(ctx, reg.Region, creds)
		if err != nil {
			return Token{}, explain(err, creds.Role, "ACR Personal Edition in "+reg.Region)
		}
	case acr.Enterprise:
		id := reg.InstanceID
		if id == "" {
			id, err = p.ACR.InstanceID(ctx, reg.Region, reg.InstanceName, creds)
			if err != nil {
				return Token{}, explain(err, creds.Role, fmt.Sprintf("ACR Enterprise instance %q in %s (looking up its ID with cr:ListInstance; "+
					"or set its id in the node file's registries.acr.instances)", reg.InstanceName, reg.Region))
			}
			reg.InstanceID = id
		}
		tok, err = p.ACR.EnterpriseToken(ctx, reg.Region, id, creds)
		if err != nil {
			return Token{}, explain(err, creds.Role, fmt.Sprintf("ACR Enterprise instance %s in %s", id, reg.Region))
		}
	default:
		return Token{}, fmt.Errorf("unknown ACR edition %q", reg.Edition)
	}
	*secrets = append(*secrets, tok.Password)
	if tok.Username == "" || tok.Password == "" {
		return Token{}, errors.New("ACR answered GetAuthorizationToken without a user name or password")
	}
	return tok, nil
}

func editionObject(reg acr.Registry) string {
	if reg.Edition == acr.Personal {
		return "region " + reg.Region
	}
	return "instance " + reg.InstanceID + " in " + reg.Region
}

// explain adds to an ACR error what to do about it.
func explain(err error, role, what string) error {
	switch {
	case errors.Is(err, ErrAccessDenied):
		return fmt.Errorf("%s: %w: grant the instance's RAM role %q the actions cr:GetAuthorizationToken (and cr:ListInstance to look up "+
			"an Enterprise instance by name): docs/node-config.md, \"Private ACR images\"", what, err, role)
	case errors.Is(err, ErrInstanceNotFound):
		return fmt.Errorf("%s: %w: check the registry domain and the instance's region and ID (ACR console, instance details)", what, err)
	}
	return fmt.Errorf("%s: %w", what, err)
}

func (p *Provider) now() time.Time {
	if p.Now != nil {
		return p.Now()
	}
	return time.Now()
}

func (p *Provider) logf(format string, args ...any) {
	if p.Log != nil {
		p.Log(fmt.Sprintf(format, args...))
	}
}

// maskedError is an error whose text has every secret replaced; errors.Is
// still sees the error it masks.
type maskedError struct {
	msg string
	err error
}

func (e *maskedError) Error() string { return e.msg }
func (e *maskedError) Unwrap() error { return e.err }

// masked replaces every secret in err's text: an SDK error can quote the
// signed request (its string to sign holds the security token).
func masked(err error, secrets []string) error {
	msg := err.Error()
	for _, s := range secrets {
		if len(s) >= 4 { // shorter would mask ordinary words
			msg = strings.ReplaceAll(msg, s, "<redacted>")
		}
	}
	return &maskedError{msg: msg, err: err}
}

// Class is the credstatus class of an error Handle returned.
func Class(err error) string {
	switch {
	case errors.Is(err, ErrNoRole):
		return credstatus.NoRAMRole
	case errors.Is(err, ErrAccessDenied):
		return credstatus.AccessDenied
	case errors.Is(err, ErrInstanceNotFound):
		return credstatus.InstanceNotFound
	}
	return credstatus.Failed
}
