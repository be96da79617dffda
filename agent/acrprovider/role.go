package acrprovider

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"slices"
	"strings"
	"time"

	"github.com/drover-os/drover/agent/provider"
)

// RoleKey is the meta-data directory of the instance's RAM role: its
// listing names the role, and the key below it holds the role's STS
// credentials as JSON (rotated by ECS before they expire).
const RoleKey = "ram/security-credentials/"

// roleCredentials is the JSON the metadata service answers for a role.
type roleCredentials struct {
	Code            string `json:"Code"`
	AccessKeyID     string `json:"AccessKeyId"`
	AccessKeySecret string `json:"AccessKeySecret"`
	SecurityToken   string `json:"SecurityToken"`
	Expiration      string `json:"Expiration"`
	LastUpdated     string `json:"LastUpdated"`
}

// RoleCredentials reads the RAM role's STS credentials from the metadata
// service. No role (the listing is 404 or empty) is ErrNoRole, and so is a
// role that disappears between the listing and its credentials (detached
// meanwhile). The returned Credentials carry the secrets even with an
// error, so that the caller can mask them in whatever it reports.
func RoleCredentials(ctx context.Context, md Metadata) (Credentials, error) {
	list, err := md.Get(ctx, RoleKey)
	if errors.Is(err, provider.ErrNotFound) {
		return Credentials{}, fmt.Errorf("%w (meta-data/%s is 404): attach a RAM role to the instance "+
			"(the launch template's RamRoleName, or ECS AttachInstanceRamRole) that may call cr:GetAuthorizationToken", ErrNoRole, RoleKey)
	}
	if err != nil {
		return Credentials{}, fmt.Errorf("reading the instance's RAM role: %w", err)
	}
	role := ""
	for _, l := range strings.Split(list, "\n") {
		if l = strings.TrimSpace(strings.TrimSuffix(l, "/")); l != "" {
			role = l
			break
		}
	}
	if role == "" {
		return Credentials{}, fmt.Errorf("%w (meta-data/%s lists none): attach a RAM role to the instance that may call cr:GetAuthorizationToken", ErrNoRole, RoleKey)
	}
	if strings.ContainsAny(role, "/?#% ") {
		return Credentials{}, fmt.Errorf("reading the instance's RAM role: meta-data/%s names %q, not a role name", RoleKey, role)
	}
	raw, err := md.Get(ctx, RoleKey+role)
	if errors.Is(err, provider.ErrNotFound) {
		return Credentials{Role: role}, fmt.Errorf("%w (meta-data/%s%s is 404: the role was detached): attach a RAM role to the instance "+
			"that may call cr:GetAuthorizationToken", ErrNoRole, RoleKey, role)
	}
	if err != nil {
		return Credentials{Role: role}, fmt.Errorf("reading the STS credentials of RAM role %q: %w", role, err)
	}
	var rc roleCredentials
	if err := json.Unmarshal([]byte(raw), &rc); err != nil {
		// Not the body: it would hold the secret if only a comma were wrong.
		return Credentials{Role: role}, fmt.Errorf("reading the STS credentials of RAM role %q: meta-data/%s%s is not the credentials JSON (%d bytes)",
			role, RoleKey, role, len(raw))
	}
	c := Credentials{Role: role, AccessKeyID: rc.AccessKeyID, AccessKeySecret: rc.AccessKeySecret, SecurityToken: rc.SecurityToken}
	if rc.Code != "" && rc.Code != "Success" {
		return c, fmt.Errorf("reading the STS credentials of RAM role %q: the metadata service answered Code %q, not Success", role, rc.Code)
	}
	var missing []string
	for name, v := range map[string]string{"AccessKeyId": rc.AccessKeyID, "AccessKeySecret": rc.AccessKeySecret,
		"SecurityToken": rc.SecurityToken, "Expiration": rc.Expiration} {
		if v == "" {
			missing = append(missing, name)
		}
	}
	slices.Sort(missing)
	if len(missing) > 0 {
		return c, fmt.Errorf("reading the STS credentials of RAM role %q: the answer lacks %s", role, strings.Join(missing, ", "))
	}
	exp, err := time.Parse(time.RFC3339, rc.Expiration)
	if err != nil {
		return c, fmt.Errorf("reading the STS credentials of RAM role %q: Expiration %q is not a UTC time like 2026-12-02T08:00:00Z", role, rc.Expiration)
	}
	c.Expiration = exp.UTC()
	return c, nil
}
