// Package httprequest is the http.request connector: one HTTP request, its response as the
// output. Private-network targets are refused unless the server allows them.
package httprequest

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/netip"
	"net/url"
	"strings"
	"syscall"
	"time"
	"unicode/utf8"

	"svc.dev/proto/connectors"
)

// Runtime is http.request as the engine runs it: after its attempt is committed (it reaches
// outside the process), with allow_private_network set by the server's configuration.
func Runtime() connectors.Runtime {
	return connectors.Runtime{
		Type: "http.request",
		New:  func(cfg connectors.Config) connectors.Executor { return newHTTPExecutor(cfg) },
		Hidden: func(cfg connectors.Config) map[string]any {
			if !cfg.AllowPrivateNetwork {
				return nil
			}
			return map[string]any{"allow_private_network": true}
		},
	}
}

// defaultMaxOutput is the attempt output bound when the configuration leaves it unset: the request
// body limit.
const defaultMaxOutput = 1 << 20

// maxResponseHeader bounds a response's header block (net/http's default is 10 MiB), so that
// the headers leave room for the body in the output.
const maxResponseHeader = 64 << 10

// ErrPrivateTarget is an http.request refused by the private-network policy: the address it
// dialled, after DNS resolution (a redirect's too), is loopback, private or link-local, and
// SVC_HTTP_ALLOW_PRIVATE is not 1. A retry would dial the same address: the engine fails the
// block at once (code private_network_refused).
var ErrPrivateTarget = errors.New("refused by the private-network policy")

// privateTargetError is ErrPrivateTarget for one address; its message says how to allow it.
type privateTargetError struct{ ip netip.Addr }

func (e *privateTargetError) Error() string {
	return e.ip.String() + " is a loopback, private or link-local address, " + ErrPrivateTarget.Error() +
		" (SVC_HTTP_ALLOW_PRIVATE=1 on run-orchestrator allows such targets, for development and tests)"
}

func (e *privateTargetError) Is(target error) bool { return target == ErrPrivateTarget }

// ErrorCode is the failed attempt's code: the engine does not retry it.
func (e *privateTargetError) ErrorCode() string { return "private_network_refused" }

type httpExecutor struct {
	strict    *http.Client // refuses private targets after DNS resolution
	open      *http.Client
	maxOutput int
}

func newHTTPExecutor(cfg connectors.Config) connectors.Executor {
	if cfg.MaxOutput <= 0 {
		cfg.MaxOutput = defaultMaxOutput
	}
	return &httpExecutor{strict: newEgressClient(true), open: newEgressClient(false), maxOutput: cfg.MaxOutput}
}

// newEgressClient builds a client whose dialer checks the address actually dialled (after DNS
// resolution, so a name that resolves to 127.0.0.1 is refused too, and so is a redirect to one).
func newEgressClient(refusePrivate bool) *http.Client {
	d := &net.Dialer{Timeout: 10 * time.Second}
	if refusePrivate {
		d.Control = func(_, address string, _ syscall.RawConn) error {
			host, _, err := net.SplitHostPort(address)
			if err != nil {
				return err
			}
			ip, err := netip.ParseAddr(host)
			if err != nil {
				return err
			}
			if blocked(ip.Unmap()) {
				return &privateTargetError{ip: ip.Unmap()}
			}
			return nil
		}
	}
	return &http.Client{
		Transport: &http.Transport{DialContext: d.DialContext, Proxy: nil, MaxIdleConnsPerHost: 16,
			TLSHandshakeTimeout: 10 * time.Second, ResponseHeaderTimeout: 60 * time.Second, MaxResponseHeaderBytes: maxResponseHeader},
		CheckRedirect: func(_ *http.Request, via []*http.Request) error {
			if len(via) >= 5 {
				return errors.New("stopped after 5 redirects")
			}
			return nil
		},
	}
}

func blocked(ip netip.Addr) bool {
	return ip.IsLoopback() || ip.IsPrivate() || ip.IsLinkLocalUnicast() || ip.IsLinkLocalMulticast() ||
		ip.IsUnspecified() || ip.IsMulticast() || ip.IsInterfaceLocalMulticast() ||
		netip.MustParsePrefix("100.64.0.0/10").Contains(ip) // carrier-grade NAT, private in practice
}

func (h *httpExecutor) Execute(ctx context.Context, c connectors.Call) (connectors.Result, error) {
	method, _ := c.Params["method"].(string)
	raw, _ := c.Params["url"].(string)
	u, err := url.Parse(raw)
	if err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" {
		return connectors.Result{}, fmt.Errorf("url %q is not an absolute http or https URL", raw)
	}
	if q, ok := c.Params["query"].(map[string]any); ok {
		vals := u.Query()
		for k, v := range q {
			vals.Add(k, fmt.Sprint(v))
		}
		u.RawQuery = vals.Encode()
	}
	var body io.Reader
	contentType := ""
	switch b := c.Params["body"].(type) {
	case nil:
	case string:
		body = strings.NewReader(b)
	default:
		enc, err := json.Marshal(b)
		if err != nil {
			return connectors.Result{}, fmt.Errorf("body: %w", err)
		}
		body = bytes.NewReader(enc)
		contentType = "application/json"
	}
	req, err := http.NewRequestWithContext(ctx, method, u.String(), body)
	if err != nil {
		return connectors.Result{}, fmt.Errorf("request: %w", err)
	}
	if contentType != "" {
		req.Header.Set("Content-Type", contentType)
	}
	if hs, ok := c.Params["headers"].(map[string]any); ok {
		for k, v := range hs {
			req.Header.Set(k, fmt.Sprint(v))
		}
	}
	client := h.strict
	if allow, _ := c.Params["allow_private_network"].(bool); allow {
		client = h.open
	}
	resp, err := client.Do(req)
	if err != nil {
		if pe := (*privateTargetError)(nil); errors.As(err, &pe) {
			return connectors.Result{}, fmt.Errorf("%s %s: %w", method, u.Redacted(), pe)
		}
		return connectors.Result{}, fmt.Errorf("%s %s: %w", method, u.Redacted(), err)
	}
	defer resp.Body.Close()
	data, err := io.ReadAll(io.LimitReader(resp.Body, int64(h.maxOutput)+1))
	if err != nil {
		return connectors.Result{}, fmt.Errorf("read response: %w", err)
	}
	truncated := len(data) > h.maxOutput
	if truncated {
		data = data[:h.maxOutput]
	}
	headers := map[string]any{}
	for k := range resp.Header {
		headers[strings.ToLower(k)] = resp.Header.Get(k)
	}
	out := map[string]any{"status": resp.StatusCode, "headers": headers}
	var parsed any
	if !truncated && strings.Contains(resp.Header.Get("Content-Type"), "json") && json.Unmarshal(data, &parsed) == nil {
		out["body"] = parsed
	} else {
		out["body"] = strings.ToValidUTF8(string(data), "\uFFFD")
	}
	if truncated {
		out["truncated"] = true
	}
	return connectors.Result{Output: fitOutput(out, data, h.maxOutput)}, nil
}

// fitOutput cuts the body of out so that out's JSON is at most limit bytes: a body at the
// limit does not fit beside the status and headers, and its JSON form may be longer than its
// bytes (escapes, a parsed body written again). The body is then the start of data as a string,
// marked truncated, cut in proportion to how much its JSON form is over; a few passes settle
// an uneven mix of escapes. Headers too large to leave any room are left to the engine's bound
// (output_too_large).
func fitOutput(out map[string]any, data []byte, limit int) map[string]any {
	// A body whose every byte would take 6 in JSON (\u00XX) still fits: no need to measure.
	if 6*(len(data)+maxResponseHeader)+1024 <= limit {
		return out
	}
	for range 4 {
		enc, err := json.Marshal(out)
		if err != nil || len(enc) <= limit {
			return out
		}
		body, ok := out["body"].(string)
		if !ok {
			body = strings.ToValidUTF8(string(data), "\uFFFD")
		}
		encBody, err := json.Marshal(body)
		if err != nil {
			return out
		}
		others := len(enc) - len(encBody)
		if _, marked := out["truncated"]; !marked {
			others += len(`,"truncated":true`)
		}
		room := max(limit-others, 0)
		cut := int(int64(len(body)) * int64(room) / int64(len(encBody)))
		for cut > 0 && cut < len(body) && !utf8.RuneStart(body[cut]) {
			cut--
		}
		out["body"], out["truncated"] = body[:min(cut, len(body))], true
	}
	return out
}
