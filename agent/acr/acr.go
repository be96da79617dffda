// Package acr knows the registry domains of Alibaba Cloud Container Registry
// (ACR): which host is which edition in which region, and the kubelet
// matchImages patterns that cover a region's registries. It is pure and
// standard library only, because the agent (which renders the kubelet's
// CredentialProviderConfig from it) must stay small; the credential
// provider (agent/acrprovider) parses the pulled image's host with it.
//
// The domains, as ACR's console and documentation give them:
//
//	registry.<region>.aliyuncs.com                   Personal Edition, internet
//	registry-vpc.<region>.aliyuncs.com               Personal Edition, VPC
//	registry-intl[-vpc].<region>.aliyuncs.com        Personal Edition, international site
//	<instance>-registry.<region>.cr.aliyuncs.com     Enterprise Edition, internet
//	<instance>-registry-vpc.<region>.cr.aliyuncs.com Enterprise Edition, VPC
//
// An Enterprise instance may also serve custom domains; those say nothing
// of the instance and must be configured with its ID and region.
package acr

import (
	"fmt"
	"net"
	"regexp"
	"strconv"
	"strings"
)

// Edition is an ACR edition, which decides the API that issues tokens.
type Edition string

// Editions.
const (
	// Personal is ACR Personal Edition: GetAuthorizationToken of API
	// 2016-06-07 (ROA, GET /tokens), one token for the account's region.
	Personal Edition = "personal"
	// Enterprise is ACR Enterprise Edition: GetAuthorizationToken of API
	// 2018-12-01 (RPC) for one instance ID.
	Enterprise Edition = "enterprise"
)

// Registry is what a host says about the ACR registry it serves.
type Registry struct {
	Host    string // as pulled, lower case, with the port if any
	Edition Edition
	Region  string
	// InstanceName is the Enterprise instance's name from a default domain
	// (<name>-registry.<region>.cr.aliyuncs.com); empty for Personal.
	InstanceName string
	// InstanceID is the Enterprise instance's ID (cri-…) when configured.
	InstanceID string
}

// personalPrefixes are the first labels of Personal Edition domains.
var personalPrefixes = []string{"registry", "registry-vpc", "registry-intl", "registry-intl-vpc"}

// eeSuffixes end the first label of an Enterprise default domain, longest
// first: an instance named "a" has "a-registry-vpc", not an instance
// "a-registry" with "-vpc".
var eeSuffixes = []string{"-registry-vpc", "-registry"}

var (
	regionRE = regexp.MustCompile(`^[a-z]{2}(-[a-z0-9]+)+$`)
	// Instance names: lower-case letters, digits and hyphens, starting
	// with a letter or digit (the console allows 3-30 characters).
	instanceNameRE = regexp.MustCompile(`^[a-z0-9][a-z0-9-]{0,63}$`)
	instanceIDRE   = regexp.MustCompile(`^cri-[a-z0-9]{1,64}$`)
	hostLabel      = `[a-z0-9]([-a-z0-9]*[a-z0-9])?`
	hostRE         = regexp.MustCompile(`^` + hostLabel + `(\.` + hostLabel + `)*$`)
)

// CheckRegion says what is wrong with a region ID ("" when nothing).
func CheckRegion(r string) string {
	if !regionRE.MatchString(r) {
		return fmt.Sprintf("%q is not an Alibaba Cloud region ID such as cn-hangzhou or ap-southeast-1", r)
	}
	return ""
}

// CheckInstanceID says what is wrong with an Enterprise instance ID.
func CheckInstanceID(id string) string {
	if !instanceIDRE.MatchString(id) {
		return fmt.Sprintf("%q is not an ACR Enterprise instance ID such as cri-kmsiwlxxdcvaduwb (the console's instance details)", id)
	}
	return ""
}

// CheckHost says what is wrong with a registry host[:port] as an image
// reference names it: a lower-case DNS name or an IPv4 address, and an
// optional port.
func CheckHost(h string) string {
	bad := fmt.Sprintf("%q is not a registry host such as myregistry-registry.cn-hangzhou.cr.aliyuncs.com (lower case, optional :port)", h)
	name, port, hasPort := strings.Cut(h, ":")
	if hasPort {
		n, err := strconv.Atoi(port)
		if err != nil || strings.TrimLeft(port, "0123456789") != "" {
			return bad
		}
		if n < 1 || n > 65535 {
			return fmt.Sprintf("%q: port %s is not in 1-65535", h, port)
		}
	}
	if ip := net.ParseIP(name); ip != nil && ip.To4() != nil {
		return ""
	}
	if len(name) > 253 || !hostRE.MatchString(name) {
		return bad
	}
	return ""
}

// Parse reads an ACR default domain. ok is false for any other host (a
// custom domain, another registry), which the caller matches against its
// configured instances.
func Parse(host string) (Registry, bool) {
	h := strings.ToLower(host)
	if strings.Contains(h, ":") { // default domains have no port
		return Registry{}, false
	}
	labels := strings.Split(h, ".")
	switch {
	case len(labels) == 4 && labels[2] == "aliyuncs" && labels[3] == "com":
		// <prefix>.<region>.aliyuncs.com
		for _, p := range personalPrefixes {
			if labels[0] == p && regionRE.MatchString(labels[1]) {
				return Registry{Host: h, Edition: Personal, Region: labels[1]}, true
			}
		}
	case len(labels) == 5 && labels[2] == "cr" && labels[3] == "aliyuncs" && labels[4] == "com":
		// <name>-registry[-vpc].<region>.cr.aliyuncs.com
		for _, s := range eeSuffixes {
			name, ok := strings.CutSuffix(labels[0], s)
			if ok && instanceNameRE.MatchString(name) && regionRE.MatchString(labels[1]) {
				return Registry{Host: h, Edition: Enterprise, Region: labels[1], InstanceName: name}, true
			}
		}
	}
	return Registry{}, false
}

// MatchImages are the kubelet matchImages patterns of every default ACR
// domain of region: the Personal Edition hosts by name and the Enterprise
// ones by a partial-label glob (a kubelet glob matches within one label,
// so "*-registry" matches "myreg-registry" and nothing with more labels).
func MatchImages(region string) []string {
	var out []string
	for _, p := range personalPrefixes {
		out = append(out, p+"."+region+".aliyuncs.com")
	}
	for _, s := range eeSuffixes {
		out = append(out, "*"+s+"."+region+".cr.aliyuncs.com")
	}
	return out
}

// ImageHost is the registry host of an image reference as the kubelet
// passes it (docker's rules: the first path component is a host when it
// has a dot or a port, or is localhost; else the image is on Docker Hub).
func ImageHost(image string) string {
	first, _, hasSlash := strings.Cut(image, "/")
	if !hasSlash || !(strings.ContainsAny(first, ".:") || first == "localhost") {
		return "docker.io"
	}
	return strings.ToLower(first)
}
