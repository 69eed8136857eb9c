// Package apiclient is the typed client of the public API (docs/API.md), shared by the
// svc CLI and the MCP tools: one method per route they use, typed errors carrying the
// contract's code, and the headers identity needs (Origin on every call, the session cookie
// for key administration, the API key elsewhere).
package apiclient

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"strconv"
	"strings"
	"time"
)

// SessionCookieName is the cookie identity sets on sign-in and sign-up.
const SessionCookieName = "svc.session_token"

// maxRateLimitRetries bounds how often one read is retried after a 429.
const maxRateLimitRetries = 5

// Auth is the credential a request carries: a session cookie (key administration:
// keys are managed only with a session) or an API key (every domain route), or neither.
type Auth struct {
	// Cookie is the session cookie as a "name=value" pair.
	Cookie string
	// APIKey is a raw "svc_..." key, sent as a bearer token.
	APIKey string
}

// Client speaks to one API instance.
type Client struct {
	base      *url.URL
	origin    string
	http      *http.Client
	userAgent string
	sleepFunc func(ctx context.Context, d time.Duration) error
	// auth is the credential of domain calls made with an empty key (WithAuth).
	auth Auth
	// keyHeader sends API keys in x-api-key rather than as a bearer token (WithAPIKeyHeader).
	keyHeader bool
}

// NewClient returns a client of the API at baseURL. httpClient must not be nil.
func NewClient(baseURL string, httpClient *http.Client, userAgent string) (*Client, error) {
	if httpClient == nil {
		panic("nil http client")
	}
	u, err := ParseBaseURL(baseURL)
	if err != nil {
		return nil, err
	}
	return &Client{base: u, origin: u.Scheme + "://" + u.Host, http: httpClient, userAgent: userAgent, sleepFunc: Sleep}, nil
}

// ParseBaseURL checks that raw is an absolute http(s) URL and returns it without a trailing
// slash, query or fragment.
func ParseBaseURL(raw string) (*url.URL, error) {
	u, err := url.Parse(strings.TrimSpace(raw))
	if err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" {
		return nil, fmt.Errorf("API URL %q is not an absolute http(s) URL", raw)
	}
	u.Path = strings.TrimRight(u.Path, "/")
	u.RawQuery, u.Fragment, u.RawPath = "", "", ""
	return u, nil
}

// NormalizeURL is the canonical text of an API URL, the key of its credentials.
func NormalizeURL(raw string) (string, error) {
	u, err := ParseBaseURL(raw)
	if err != nil {
		return "", err
	}
	return u.String(), nil
}

// WithAuth returns a client whose domain calls made with an empty key carry a instead: the
// gateway's MCP endpoint acts with its caller's credential, which may be a session cookie or
// a session token rather than an API key.
func (c *Client) WithAuth(a Auth) *Client {
	cp := *c
	cp.auth = a
	return &cp
}

// WithOrigin returns a client that sends origin as the Origin of every call, in place of the
// API's own. Identity refuses an auth call that changes state from an Origin it does not trust
// (SVC_TRUSTED_ORIGINS); a caller that the system knows by another origin says which.
func (c *Client) WithOrigin(origin string) *Client {
	cp := *c
	cp.origin = origin
	return &cp
}

// WithAPIKeyHeader returns a client that sends API keys in the x-api-key header rather than
// as a bearer token. The gateway takes either for a key; a caller whose other requests carry
// x-api-key (the load of tools/bench) sends its own calls the same way.
func (c *Client) WithAPIKeyHeader() *Client {
	cp := *c
	cp.keyHeader = true
	return &cp
}

// BaseURL is the API's address.
func (c *Client) BaseURL() string { return c.base.String() }

// Sleep waits d, or until ctx ends (its error then). A d of zero or less returns at once.
func Sleep(ctx context.Context, d time.Duration) error {
	if d <= 0 {
		return ctx.Err()
	}
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-ctx.Done():
		return ctx.Err()
	case <-t.C:
		return nil
	}
}

// request is one call.
type request struct {
	method string
	path   string
	query  url.Values
	auth   Auth
	body   any
	header http.Header
}

// response is a call's answer.
type response struct {
	status int
	header http.Header
	body   []byte
}

// do sends req. A 2xx answer is returned; any other becomes an *Error. Reads (GET) that are
// rate limited are retried after the wait the API asks for, a few times.
func (c *Client) do(ctx context.Context, req request) (*response, error) {
	for attempt := 0; ; attempt++ {
		resp, err := c.once(ctx, req)
		if err != nil {
			return nil, err
		}
		if resp.status >= 200 && resp.status < 300 {
			return resp, nil
		}
		apiErr := toError(resp)
		if resp.status == http.StatusTooManyRequests && req.method == http.MethodGet && attempt < maxRateLimitRetries {
			if err := c.sleepFunc(ctx, apiErr.RetryAfter); err != nil {
				return nil, err
			}
			continue
		}
		return nil, apiErr
	}
}

func (c *Client) once(ctx context.Context, req request) (*response, error) {
	u := *c.base
	u.Path = c.base.Path + req.path
	if len(req.query) > 0 {
		u.RawQuery = req.query.Encode()
	}
	var body io.Reader
	if req.body != nil {
		b, err := json.Marshal(req.body)
		if err != nil {
			return nil, fmt.Errorf("encode request: %w", err)
		}
		body = bytes.NewReader(b)
	}
	hr, err := http.NewRequestWithContext(ctx, req.method, u.String(), body)
	if err != nil {
		return nil, fmt.Errorf("build request: %w", err)
	}
	for k, vs := range req.header {
		for _, v := range vs {
			hr.Header.Add(k, v)
		}
	}
	if req.body != nil {
		hr.Header.Set("Content-Type", "application/json")
	}
	hr.Header.Set("Accept", "application/json")
	// Identity refuses mutating auth calls without an Origin it trusts; the API's own origin
	// is trusted (SVC_PUBLIC_URL). Domain routes ignore it.
	hr.Header.Set("Origin", c.origin)
	if c.userAgent != "" {
		hr.Header.Set("User-Agent", c.userAgent)
	}
	c.setAuth(hr.Header, req.auth)
	resp, err := c.http.Do(hr)
	if err != nil {
		return nil, &TransportError{Method: req.method, URL: u.String(), Err: err}
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(io.LimitReader(resp.Body, 64<<20))
	if err != nil {
		return nil, &TransportError{Method: req.method, URL: u.String(), Err: err}
	}
	return &response{status: resp.StatusCode, header: resp.Header, body: b}, nil
}

// setAuth puts a's credentials on h: the API key as a bearer token (or in x-api-key, see
// WithAPIKeyHeader), the session cookie as it is.
func (c *Client) setAuth(h http.Header, a Auth) {
	if a.APIKey != "" {
		if c.keyHeader {
			h.Set("X-Api-Key", a.APIKey)
		} else {
			h.Set("Authorization", "Bearer "+a.APIKey)
		}
	}
	if a.Cookie != "" {
		h.Set("Cookie", a.Cookie)
	}
}

// decodeInto unmarshals a response body.
func decodeInto(resp *response, v any) error {
	if err := json.Unmarshal(resp.body, v); err != nil {
		return fmt.Errorf("decode response (HTTP %d): %w", resp.status, err)
	}
	return nil
}

// TransportError is a request that got no HTTP answer.
type TransportError struct {
	Method, URL string
	Err         error
}

func (e *TransportError) Error() string {
	return fmt.Sprintf("cannot reach the API (%s %s): %v", e.Method, e.URL, e.Err)
}

func (e *TransportError) Unwrap() error { return e.Err }

// Error is an answer outside 2xx: the service's {error, message, ...} or the auth layer's
// {code, message}, with the code in Code either way.
type Error struct {
	Status  int
	Code    string
	Message string
	// Issues are invalid_body's {path, message} items.
	Issues []Issue
	// Current is version_mismatch's current version.
	Current int64
	// RetryAfter is how long a rate-limited caller should wait.
	RetryAfter time.Duration
	// Body is the raw answer.
	Body json.RawMessage
}

// Issue is one problem of an invalid body.
type Issue struct {
	Path    string `json:"path"`
	Message string `json:"message"`
}

func (e *Error) Error() string {
	msg := e.Code
	if msg == "" {
		msg = "HTTP " + strconv.Itoa(e.Status)
	}
	if e.Message != "" {
		msg += ": " + e.Message
	}
	return msg
}

// IsCode reports whether err is an *Error with code.
func IsCode(err error, code string) bool {
	var e *Error
	return errors.As(err, &e) && e.Code == code
}

func toError(resp *response) *Error {
	var body struct {
		Error        string  `json:"error"`
		Code         string  `json:"code"`
		Message      string  `json:"message"`
		Issues       []Issue `json:"issues"`
		Current      int64   `json:"current"`
		RetryAfterMs int64   `json:"retryAfterMs"`
	}
	e := &Error{Status: resp.status, Body: resp.body}
	if json.Unmarshal(resp.body, &body) == nil {
		e.Code, e.Message, e.Issues, e.Current = body.Error, body.Message, body.Issues, body.Current
		if e.Code == "" {
			e.Code = body.Code
		}
		e.RetryAfter = time.Duration(body.RetryAfterMs) * time.Millisecond
	}
	if e.Code == "" {
		e.Message = strings.TrimSpace(string(resp.body))
		if len(e.Message) > 200 {
			e.Message = e.Message[:200] + "…"
		}
	}
	if e.RetryAfter <= 0 {
		if s, err := strconv.Atoi(resp.header.Get("Retry-After")); err == nil && s > 0 {
			e.RetryAfter = time.Duration(s) * time.Second
		}
	}
	if e.RetryAfter <= 0 {
		e.RetryAfter = time.Second
	}
	return e
}
