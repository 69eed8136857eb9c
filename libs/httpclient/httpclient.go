// Package httpclient is how a service calls a peer: a pooled transport with timeouts, a span
// per call (otelhttp), identity signing (internalauth), a circuit breaker per peer (gobreaker)
// so that a dead peer costs a fast 503 instead of a pile of waiting requests, and typed
// decoding of the peer's {"error": code} bodies.
package httpclient

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/url"
	"strings"
	"time"

	"github.com/sony/gobreaker/v2"
	"go.opentelemetry.io/contrib/instrumentation/net/http/otelhttp"
	semconv "go.opentelemetry.io/otel/semconv/v1.43.0"
	"go.opentelemetry.io/otel/trace"

	"svc.dev/libs/internalauth"
	"svc.dev/libs/telemetry"
	"svc.dev/proto/errs"
)

// Config describes one peer.
type Config struct {
	// Peer names the peer in spans, logs and the breaker.
	Peer    string
	BaseURL string
	// Timeout bounds a whole call made with Do; zero means 10 s.
	Timeout time.Duration
	// Service is the caller's name, used to sign calls that carry no client identity; empty
	// leaves such calls unsigned.
	Service   string
	Signer    internalauth.Signer
	Telemetry telemetry.Telemetry
	// Breaker tuning; zero values take the defaults (5 failures in a row open it for 5 s).
	FailuresToOpen uint32
	OpenFor        time.Duration
}

// Client calls one peer.
type Client struct {
	peer    string
	baseURL string
	http    *http.Client
	rt      http.RoundTripper
}

// errPeerDown marks answers that count against the breaker but still reach the caller.
var errPeerDown = errors.New("peer answered 502/503/504") //nolint:gochecknoglobals // sentinel

// New returns a client for cfg.
func New(cfg Config) *Client {
	if cfg.Peer == "" || cfg.BaseURL == "" {
		panic("httpclient: peer and base url are required")
	}
	if cfg.Timeout == 0 {
		cfg.Timeout = 10 * time.Second
	}
	if cfg.FailuresToOpen == 0 {
		cfg.FailuresToOpen = 5
	}
	if cfg.OpenFor == 0 {
		cfg.OpenFor = 5 * time.Second
	}
	base := &http.Transport{
		Proxy:                 nil, // internal calls never go through an egress proxy
		DialContext:           (&net.Dialer{Timeout: 2 * time.Second, KeepAlive: 30 * time.Second}).DialContext,
		MaxIdleConns:          256,
		MaxIdleConnsPerHost:   128,
		IdleConnTimeout:       90 * time.Second,
		ResponseHeaderTimeout: 60 * time.Second,
		ExpectContinueTimeout: time.Second,
	}
	signed := internalauth.Transport{Signer: cfg.Signer, Service: cfg.Service, Base: base, Now: time.Now}
	// otelhttp records the whole URL (url.full) on the client span, query included; a
	// forwarded client request's query may carry a secret (POST /api/auth/reset-password?token=).
	traced := otelhttp.NewTransport(redactingTransport{next: signed},
		otelhttp.WithTracerProvider(cfg.Telemetry.Tracer),
		otelhttp.WithMeterProvider(cfg.Telemetry.Meter),
		otelhttp.WithPropagators(cfg.Telemetry.Propagator),
		otelhttp.WithSpanNameFormatter(func(_ string, r *http.Request) string {
			// The route the request matched (the gateway's hop), not its path: ids stay out
			// of span names.
			if route := telemetry.Route(r.Context()); route != "" {
				return cfg.Peer + " " + r.Method + " " + route
			}
			return cfg.Peer + " " + r.Method + " " + r.URL.Path
		}))
	threshold := cfg.FailuresToOpen
	breaker := gobreaker.NewCircuitBreaker[*http.Response](gobreaker.Settings{ //nolint:bodyclose // the breaker hands the response back; callers close it
		Name:        cfg.Peer,
		MaxRequests: 1,
		Timeout:     cfg.OpenFor,
		ReadyToTrip: func(c gobreaker.Counts) bool { return c.ConsecutiveFailures >= threshold },
		IsSuccessful: func(err error) bool {
			// A caller that gave up says nothing about the peer's health.
			return err == nil || errors.Is(err, context.Canceled)
		},
	})
	rt := breakerTransport{next: traced, cb: breaker}
	return &Client{
		peer:    cfg.Peer,
		baseURL: strings.TrimRight(cfg.BaseURL, "/"),
		http:    &http.Client{Transport: rt, Timeout: cfg.Timeout},
		rt:      rt,
	}
}

// HTTP is the client for Connect stubs and other callers that build their own requests.
func (c *Client) HTTP() *http.Client { return c.http }

// Transport is the round tripper without the per-call timeout, for streaming (the gateway's
// reverse proxy).
func (c *Client) Transport() http.RoundTripper { return c.rt }

// BaseURL is the peer's address.
func (c *Client) BaseURL() string { return c.baseURL }

// Do sends in (when not nil) as JSON and decodes a 2xx answer into out (when not nil). A
// non-2xx answer comes back as the peer's *errs.Error; an unreachable peer or an open breaker
// as errs.Unavailable.
func (c *Client) Do(ctx context.Context, method, path string, in, out any) error {
	var body io.Reader
	if in != nil {
		b, err := json.Marshal(in)
		if err != nil {
			return fmt.Errorf("%s %s: encode: %w", c.peer, path, err)
		}
		body = bytes.NewReader(b)
	}
	req, err := http.NewRequestWithContext(ctx, method, c.baseURL+path, body)
	if err != nil {
		return fmt.Errorf("%s %s: %w", c.peer, path, err)
	}
	if in != nil {
		req.Header.Set("Content-Type", "application/json")
	}
	req.Header.Set("Accept", "application/json")
	resp, err := c.http.Do(req)
	if err != nil {
		return errs.New(errs.Unavailable, fmt.Errorf("%s %s: %w", c.peer, path, err)).
			WithMessage(c.peer + " is unavailable")
	}
	defer resp.Body.Close()
	raw, err := io.ReadAll(io.LimitReader(resp.Body, 8<<20))
	if err != nil {
		return errs.New(errs.Unavailable, fmt.Errorf("%s %s: read: %w", c.peer, path, err))
	}
	if resp.StatusCode < 200 || resp.StatusCode > 299 {
		e := errs.Decode(resp.StatusCode, raw)
		if e.Cause != nil {
			e.Cause = fmt.Errorf("%s %s: %w", c.peer, path, e.Cause)
		}
		return e
	}
	if out != nil && len(raw) > 0 {
		if err := json.Unmarshal(raw, out); err != nil {
			return fmt.Errorf("%s %s: decode: %w", c.peer, path, err)
		}
	}
	return nil
}

// redactingTransport runs inside otelhttp's client span and overwrites the span's url.full
// with RedactedURL: the span is recorded with the last value an attribute was given.
type redactingTransport struct{ next http.RoundTripper }

func (t redactingTransport) RoundTrip(req *http.Request) (*http.Response, error) {
	if req.URL != nil && req.URL.RawQuery != "" {
		trace.SpanFromContext(req.Context()).SetAttributes(semconv.URLFull(RedactedURL(req.URL)))
	}
	return t.next.RoundTrip(req)
}

// Redacted is what every query value becomes in RedactedURL.
const Redacted = "REDACTED"

// RedactedURL is u as telemetry may record it: no user info, and every query value replaced
// by Redacted, names kept (a query of a forwarded request is the client's and may hold a
// token, a signature, an address). A query that does not parse is replaced as a whole.
func RedactedURL(u *url.URL) string {
	c := *u
	c.User = nil
	if c.RawQuery != "" {
		q, err := url.ParseQuery(c.RawQuery)
		if err != nil {
			c.RawQuery = Redacted
		} else {
			for k, vs := range q {
				for i := range vs {
					vs[i] = Redacted
				}
				q[k] = vs
			}
			c.RawQuery = q.Encode()
		}
	}
	c.ForceQuery = false
	return c.String()
}

type breakerTransport struct {
	next http.RoundTripper
	cb   *gobreaker.CircuitBreaker[*http.Response]
}

func (b breakerTransport) RoundTrip(req *http.Request) (*http.Response, error) {
	resp, err := b.cb.Execute(func() (*http.Response, error) {
		resp, err := b.next.RoundTrip(req)
		if err != nil {
			return nil, err
		}
		switch resp.StatusCode {
		case http.StatusBadGateway, http.StatusServiceUnavailable, http.StatusGatewayTimeout:
			return resp, errPeerDown
		}
		return resp, nil
	})
	if errors.Is(err, errPeerDown) {
		return resp, nil
	}
	if err != nil {
		return nil, fmt.Errorf("%s: %w", b.cb.Name(), err)
	}
	return resp, nil
}
