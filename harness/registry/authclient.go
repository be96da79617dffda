package registry

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"regexp"
	"strings"
)

// FetchManifest gets repo's manifest ref from the registry at base
// (http://host:port) the way containerd's resolver and docker do, without
// either: the request, on a 401 with a Bearer challenge the token
// exchange at its realm (with user and password as basic auth when user is
// not empty), and the request again with the token. It returns the
// manifest, or an error naming the status that refused it.
func FetchManifest(ctx context.Context, base, repo, ref, user, password string) ([]byte, error) {
	u := strings.TrimSuffix(base, "/") + "/v2/" + repo + "/manifests/" + ref
	get := func(auth string) (*http.Response, error) {
		req, err := http.NewRequestWithContext(ctx, http.MethodGet, u, nil)
		if err != nil {
			return nil, err
		}
		req.Header.Set("Accept", "application/vnd.oci.image.index.v1+json, application/vnd.oci.image.manifest.v1+json, application/vnd.docker.distribution.manifest.v2+json, application/vnd.docker.distribution.manifest.list.v2+json")
		if auth != "" {
			req.Header.Set("Authorization", auth)
		}
		return http.DefaultClient.Do(req)
	}
	resp, err := get("")
	if err != nil {
		return nil, err
	}
	if resp.StatusCode == http.StatusUnauthorized {
		challenge := resp.Header.Get("WWW-Authenticate")
		resp.Body.Close()
		tok, err := exchange(ctx, challenge, user, password)
		if err != nil {
			return nil, fmt.Errorf("GET %s: 401 (%s): %w", u, challenge, err)
		}
		if resp, err = get("Bearer " + tok); err != nil {
			return nil, err
		}
	}
	defer resp.Body.Close()
	body, err := io.ReadAll(io.LimitReader(resp.Body, 4<<20))
	if err != nil {
		return nil, err
	}
	if resp.StatusCode != http.StatusOK {
		return nil, fmt.Errorf("GET %s: %s: %s", u, resp.Status, strings.TrimSpace(string(body)))
	}
	return body, nil
}

var challengeParam = regexp.MustCompile(`(\w+)="([^"]*)"`)

// exchange asks a Bearer challenge's realm for a token.
func exchange(ctx context.Context, challenge, user, password string) (string, error) {
	rest, ok := strings.CutPrefix(challenge, "Bearer ")
	if !ok {
		return "", fmt.Errorf("not a Bearer challenge")
	}
	params := map[string]string{}
	for _, m := range challengeParam.FindAllStringSubmatch(rest, -1) {
		params[m[1]] = m[2]
	}
	q := url.Values{}
	for _, k := range []string{"service", "scope"} {
		if params[k] != "" {
			q.Set(k, params[k])
		}
	}
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, params["realm"]+"?"+q.Encode(), nil)
	if err != nil {
		return "", fmt.Errorf("token realm %q: %w", params["realm"], err)
	}
	if user != "" {
		req.SetBasicAuth(user, password)
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		return "", err
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		b, _ := io.ReadAll(io.LimitReader(resp.Body, 4096))
		return "", fmt.Errorf("token realm %s: %s: %s", params["realm"], resp.Status, strings.TrimSpace(string(b)))
	}
	var t struct {
		Token       string `json:"token"`
		AccessToken string `json:"access_token"`
	}
	if err := json.NewDecoder(resp.Body).Decode(&t); err != nil {
		return "", fmt.Errorf("token realm %s: %w", params["realm"], err)
	}
	if t.Token == "" {
		t.Token = t.AccessToken
	}
	return t.Token, nil
}
