package provider

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"strconv"
	"strings"
	"time"

	"github.com/drover-os/drover/internal/retry"
)

// Retry timing: exponential from retryBase, capped at retryCap, with "equal
// jitter" (half fixed, half random) so many nodes booting together spread out
// without ever retrying immediately.
const (
	retryBase = 200 * time.Millisecond
	retryCap  = 5 * time.Second
)

// RetryPolicy is the agent's one retry policy (its waits; how long to go
// on is each caller's budget): the metadata client and the drift guard's
// and health reporter's reports to the API server use it.
func RetryPolicy() retry.Policy {
	return retry.Policy{Base: retryBase, Max: retryCap, Jitter: retry.Equal}
}

// outcome is the result of one HTTP exchange.
type outcome struct {
	code       int
	status     string // "503 Service Unavailable"
	retryAfter time.Duration
	body       []byte
	err        error // transport failure: retryable
	fatal      error // retrying cannot help
}

func (o outcome) ok() bool { return o.err == nil && o.fatal == nil && o.code == http.StatusOK }

// retryable: the service is not up yet, overloaded or rate-limiting.
func (o outcome) retryable() bool {
	if o.fatal != nil {
		return false
	}
	return o.err != nil || o.code >= 500 || o.code == http.StatusTooManyRequests
}

// describe is the outcome as it appears in a log line.
func (o outcome) describe() string {
	switch {
	case o.fatal != nil:
		return o.fatal.Error()
	case o.err != nil:
		return o.err.Error()
	}
	return o.status
}

// cause is the outcome as an error for wrapping.
func (o outcome) cause(method, path string) error {
	switch {
	case o.fatal != nil:
		return o.fatal
	case o.err != nil:
		return o.err
	}
	return &StatusError{Method: method, Path: path, Code: o.code, Status: o.status}
}

// roundTrip performs one exchange. ttl > 0 makes it a token request.
func (c *ECSClient) roundTrip(ctx context.Context, method, path, token string, ttl time.Duration, limit int64) outcome {
	timeout := c.attemptTimeout()
	actx, cancel := context.WithTimeout(ctx, timeout)
	defer cancel()
	req, err := http.NewRequestWithContext(actx, method, c.baseURL()+path, nil)
	if err != nil {
		return outcome{fatal: fmt.Errorf("building request for %s: %w: check the metadata base URL", c.baseURL(), err)}
	}
	if token != "" {
		req.Header.Set(tokenHeader, token)
	}
	if ttl > 0 {
		req.Header.Set(tokenTTLHeader, strconv.Itoa(int(ttl/time.Second)))
	}
	resp, err := c.httpClient().Do(req)
	if err != nil {
		return outcome{err: transportError(err, timeout)}
	}
	defer resp.Body.Close()
	o := outcome{code: resp.StatusCode, status: resp.Status, retryAfter: retry.ParseRetryAfter(resp.Header.Get("Retry-After"))}
	o.body, err = io.ReadAll(io.LimitReader(resp.Body, limit+1))
	if err != nil {
		return outcome{err: fmt.Errorf("reading the answer (%s): %w", resp.Status, transportError(err, timeout))}
	}
	if int64(len(o.body)) > limit && o.code == http.StatusOK {
		o.fatal = fmt.Errorf("answer larger than %d bytes", limit)
	}
	return o
}

// transportError drops url.Error's repetition of method and URL, which every
// log line already names, and says plainly when the attempt timed out.
func transportError(err error, timeout time.Duration) error {
	var ue *url.Error
	if errors.As(err, &ue) {
		err = ue.Err
	}
	if errors.Is(err, context.DeadlineExceeded) {
		return fmt.Errorf("no answer within %s: %w", timeout, err)
	}
	return err
}

// get fetches path within budget b, with the token protocol and retries. A final
// non-200 answer is returned as a wrapped *StatusError.
func (c *ECSClient) get(ctx context.Context, b budget, path string, limit int64) ([]byte, error) {
	const method = http.MethodGet
	renewed := false
	logf := c.logf
	if b.quiet {
		logf = func(string, ...any) {}
	}
	for attempt := 1; ; attempt++ {
		token, err := c.currentToken(ctx, b)
		if err != nil {
			return nil, fmt.Errorf("metadata GET %s: %w", path, err)
		}
		o := c.roundTrip(ctx, method, path, token, 0, limit)
		switch {
		case o.ok():
			logf("metadata: GET %s attempt %d: %s", path, attempt, o.status)
			return o.body, nil
		case o.code == http.StatusUnauthorized && token != "" && !renewed:
			// The token expired early or the service restarted: one new token, once.
			c.logf("metadata: GET %s attempt %d: %s; requesting a new token", path, attempt, o.status)
			c.forgetToken(token)
			renewed = true
			continue
		case !o.retryable():
			logf("metadata: GET %s attempt %d: %s", path, attempt, o.describe())
			err := fmt.Errorf("metadata GET %s: %w", path, o.cause(method, path))
			if o.code == http.StatusForbidden && token == "" {
				err = fmt.Errorf("%w: the instance requires metadata tokens but the service offers no token endpoint; "+
					"check the instance's metadata options (HttpTokens)", err)
			}
			return nil, err
		}
		if err := c.pause(ctx, b, method, path, attempt, o); err != nil {
			return nil, err
		}
	}
}

// currentToken returns a token that is not about to expire, requesting one if
// needed, or "" when the service has no token endpoint.
func (c *ECSClient) currentToken(ctx context.Context, b budget) (string, error) {
	c.tokenMu.Lock()
	defer c.tokenMu.Unlock()
	c.mu.Lock()
	token, renewAt, tokenless := c.token, c.tokenRenewAt, c.tokenless
	c.mu.Unlock()
	if tokenless {
		return "", nil
	}
	if token != "" && c.now().Before(renewAt) {
		return token, nil
	}

	const method = http.MethodPut
	ttl := c.tokenTTL()
	for attempt := 1; ; attempt++ {
		issued := c.now() // counting from before the request errs on the early side
		o := c.roundTrip(ctx, method, tokenPath, "", ttl, 4096)
		switch {
		case o.ok():
			token := strings.TrimSpace(string(o.body))
			if token == "" {
				c.logf("metadata: PUT %s attempt %d: %s with an empty token", tokenPath, attempt, o.status)
				return "", fmt.Errorf("requesting a metadata token: the service answered %s with an empty body", o.status)
			}
			c.logf("metadata: PUT %s attempt %d: %s (token for %s)", tokenPath, attempt, o.status, ttl)
			c.mu.Lock()
			c.token, c.tokenRenewAt = token, issued.Add(ttl-min(ttl/10, time.Minute))
			c.mu.Unlock()
			return token, nil
		case o.code == http.StatusNotFound || o.code == http.StatusMethodNotAllowed:
			// An old service without hardened mode. This is sticky, so it is logged once.
			c.logf("metadata: PUT %s attempt %d: %s; no token endpoint, continuing without a token",
				tokenPath, attempt, o.status)
			c.mu.Lock()
			c.tokenless = true
			c.mu.Unlock()
			return "", nil
		case o.code == http.StatusForbidden:
			c.logf("metadata: PUT %s attempt %d: %s", tokenPath, attempt, o.status)
			return "", fmt.Errorf("requesting a metadata token: %w: the service refuses token requests that "+
				"pass through a proxy (X-Forwarded-For); make sure nothing proxies requests to %s",
				o.cause(method, tokenPath), c.baseURL())
		case !o.retryable():
			c.logf("metadata: PUT %s attempt %d: %s", tokenPath, attempt, o.describe())
			return "", fmt.Errorf("requesting a metadata token (TTL %s): %w", ttl, o.cause(method, tokenPath))
		}
		if err := c.pause(ctx, b, method, tokenPath, attempt, o); err != nil {
			return "", err
		}
	}
}

// forgetToken drops token unless another caller already replaced it.
func (c *ECSClient) forgetToken(token string) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.token == token {
		c.token = ""
	}
}

// backoff is the wait before attempt+1 (attempt counts from 1), at least
// the answer's Retry-After up to the cap.
func (c *ECSClient) backoff(attempt int, o outcome) time.Duration {
	return RetryPolicy().Wait(attempt-1, o.retryAfter, c.rand())
}

// pause logs a failed attempt and waits before the next one, or gives up with an
// error naming the request and its last result when the budget is spent.
func (c *ECSClient) pause(ctx context.Context, b budget, method, path string, attempt int, o outcome) error {
	wait := c.backoff(attempt, o)
	if ctx.Err() == nil && c.now().Add(wait).Before(b.end) {
		c.logf("metadata: %s %s attempt %d: %s; retrying in %s", method, path, attempt, o.describe(),
			wait.Round(time.Millisecond))
		if err := c.sleep(ctx, wait); err == nil {
			return nil
		}
	}
	if errors.Is(ctx.Err(), context.Canceled) {
		c.logf("metadata: %s %s attempt %d: %s; interrupted", method, path, attempt, o.describe())
		return fmt.Errorf("metadata %s %s: interrupted after %d attempts (last: %w): %w",
			method, path, attempt, o.cause(method, path), ctx.Err())
	}
	c.logf("metadata: %s %s attempt %d: %s; giving up after %s", method, path, attempt, o.describe(),
		c.now().Sub(b.start).Round(time.Millisecond))
	return fmt.Errorf("metadata %s %s: no success in %d attempts within %s (last: %w): "+
		"check that the instance network is up and the metadata service at %s is reachable",
		method, path, attempt, c.deadline(), o.cause(method, path), c.baseURL())
}
