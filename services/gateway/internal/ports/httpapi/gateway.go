package httpapi

import (
	"bytes"
	"context"
	"errors"
	"io"
	"log/slog"
	"net"
	"net/http"
	"net/http/httputil"
	"net/url"
	"strconv"
	"time"

	"go.opentelemetry.io/otel/metric"

	"svc.dev/libs/buildinfo"
	"svc.dev/libs/internalauth"
	"svc.dev/libs/ratelimit"
	"svc.dev/libs/telemetry"
	"svc.dev/libs/web"
	"svc.dev/proto/errs"
	"svc.dev/services/gateway/console"
	"svc.dev/services/gateway/internal/app"
)

// Upstream is one peer: where it lives and the transport that reaches it (signing, tracing,
// breaker).
type Upstream struct {
	URL       *url.URL
	Transport http.RoundTripper
}

// Gateway is the public handler.
type Gateway struct {
	log      *slog.Logger
	resolver app.Resolver
	limiter  app.RateLimiter
	routes   []route
	proxies  map[Peer]*httputil.ReverseProxy
	health   http.Handler
	openAPI  http.Handler
	// mcp serves mcpPath (mcp.go) behind the guard and the rate limit.
	mcp http.Handler
	// streams caps the event streams open per principal, user and organization (streams.go).
	streams streams
	// streamsOpen is svc_gateway_streams_open (nil: not reported).
	streamsOpen metric.Int64UpDownCounter
	// origins are the trusted origins (SVC_PUBLIC_URL's and SVC_TRUSTED_ORIGINS): a write the
	// session cookie authenticates must come from a page of one of them (origin.go).
	origins web.Origins
	// console serves the web console's pages and assets (GET and HEAD of "/", its client
	// routes and /assets/*), open like /health: the pages hold no data, the API they call is
	// guarded as for any client.
	console *console.Handler
}

// NewGateway returns the gateway for the given peers; every peer of the routing table must be
// present. Each guarded request takes a token from limiter.
func NewGateway(log *slog.Logger, resolver app.Resolver, limiter app.RateLimiter, upstreams map[Peer]Upstream) *Gateway {
	if resolver == nil {
		panic("nil resolver")
	}
	if limiter == nil {
		panic("nil rate limiter")
	}
	g := &Gateway{log: log, resolver: resolver, limiter: limiter, routes: table(), proxies: map[Peer]*httputil.ReverseProxy{},
		health: web.Health(buildinfo.Version()), openAPI: newOpenAPIHandler(log),
		streams: streams{limits: StreamLimitsFor(DefaultMaxStreams), open: map[string]int{}}, console: console.New(), origins: web.Origins{}}
	g.mcp = newMCPHandler(log, g)
	for _, r := range g.routes {
		up, ok := upstreams[r.Peer]
		if !ok || up.URL == nil || up.Transport == nil {
			panic("no upstream for " + string(r.Peer))
		}
		if _, done := g.proxies[r.Peer]; !done {
			g.proxies[r.Peer] = g.newProxy(r.Peer, up)
		}
	}
	return g
}

func (g *Gateway) newProxy(peer Peer, up Upstream) *httputil.ReverseProxy {
	return &httputil.ReverseProxy{
		Rewrite: func(pr *httputil.ProxyRequest) {
			pr.SetURL(up.URL)
			pr.SetXForwarded()
			pr.Out.Host = pr.In.Host
		},
		// The gateway already put the request id on the response; the service echoes the same
		// id, and keeping both would send the header twice. Likewise on guarded routes the
		// gateway's bucket is the one the client is limited by, and a service's own
		// RateLimit-* headers would contradict it.
		ModifyResponse: func(resp *http.Response) error {
			resp.Header.Del(web.RequestIDHeader)
			if resp.Request == nil {
				return nil
			}
			if id, ok := internalauth.FromContext(resp.Request.Context()); ok && id.AuthMode != internalauth.ModeService {
				for _, h := range [...]string{headerLimit, headerRemaining, headerReset} {
					resp.Header.Del(h)
				}
			}
			return nil
		},
		Transport:     up.Transport,
		FlushInterval: -1, // stream answers (log follows) as they are written
		ErrorLog:      slog.NewLogLogger(g.log.Handler(), slog.LevelWarn),
		ErrorHandler: func(w http.ResponseWriter, r *http.Request, err error) {
			if errors.Is(err, r.Context().Err()) {
				return // the client went away
			}
			g.log.WarnContext(r.Context(), "upstream failed", "peer", string(peer), "err", err)
			writeError(w, r, g.log, &upstreamError{peer: peer, err: err})
		},
	}
}

// ServeHTTP runs the guard and the rate limit, then routes. Order matters (docs/API.md,
// "Conventions"): without valid credentials a guarded path is 401 whether or not any route has
// it, and a request to an unknown route still spends a token.
func (g *Gateway) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	p := cleanPath(r.URL.Path)
	if p != r.URL.Path {
		r.URL.Path, r.URL.RawPath = p, ""
	}
	if p == "/health" {
		if r.Method != http.MethodGet && r.Method != http.MethodHead {
			writeError(w, r, g.log, errMethodNotAllowed)
			return
		}
		g.health.ServeHTTP(w, r)
		return
	}
	if p == openAPIPath {
		g.openAPI.ServeHTTP(w, r)
		return
	}
	if g.console.Owns(r.Method, p) {
		r = r.WithContext(telemetry.WithRoute(r.Context(), r.Method, "/"))
		g.console.ServeHTTP(w, r)
		return
	}
	if g.console.Navigation(r, p) {
		// A browser loading a page no route has (a mistyped or stale link): the console's
		// not-found page, not the JSON an API client gets. Nothing under /api is one.
		r = r.WithContext(telemetry.WithRoute(r.Context(), r.Method, "/"))
		g.console.ServeNotFound(w, r)
		return
	}
	var stream *internalauth.Identity // the identity of an event stream
	if !isOpen(g.routes, p) {
		id, taken, ok := g.guard(w, r)
		if !ok {
			return
		}
		if !g.limit(w, r, id, taken) {
			return
		}
		if p == mcpPath {
			// Served here, with the caller's credentials still on the request: each tool call
			// comes back through ServeHTTP with them (mcp.go).
			g.serveMCP(w, r)
			return
		}
		// The service gets the signed identity instead of the raw credentials.
		r.Header.Del("Authorization")
		r.Header.Del("Cookie")
		r.Header.Del("X-Api-Key")
		r = r.WithContext(internalauth.WithIdentity(r.Context(), id))
		if isEventStream(r) {
			stream = &id
		}
	}
	rt, ok := match(g.routes, p)
	if !ok {
		writeError(w, r, g.log, errNoRoute)
		return
	}
	r = r.WithContext(telemetry.WithRoute(r.Context(), r.Method, rt.name()))
	if rt.Open && rt.Peer == Identity {
		r = r.WithContext(internalauth.WithIdentity(r.Context(), vouchFor(r)))
	}
	if err := bufferBody(r, web.MaxBodyBytes); err != nil {
		writeError(w, r, g.log, err)
		return
	}
	if stream != nil {
		g.serveStream(w, r, *stream, g.proxies[rt.Peer])
		return
	}
	g.proxies[rt.Peer].ServeHTTP(w, r)
}

// guard resolves the credentials. When the resolver can take the rate-limit token itself
// (app.LimitingResolver, overlapping it with its own work), the token it took is returned too.
func (g *Gateway) guard(w http.ResponseWriter, r *http.Request) (internalauth.Identity, *ratelimit.Result, bool) {
	cr := app.Credentials{
		Authorization: r.Header.Get("Authorization"),
		Cookie:        r.Header.Get("Cookie"),
		APIKey:        r.Header.Get("X-Api-Key"),
		ClientIP:      clientIP(r),
	}
	crossSite := g.cookieFromUntrustedPage(r)
	if crossSite {
		// The browser attached the cookie to a write another site's page made it send: the
		// cookie authenticates nothing here, not even what the request asks of the MCP tools.
		// Credentials such a page cannot set (a bearer token, an API key) still may.
		cr.Cookie = ""
		r.Header.Del("Cookie")
	}
	if crossSite && !cr.Present() {
		writeError(w, r, g.log, errUntrustedPage)
		return internalauth.Identity{}, nil, false
	}
	if !cr.Present() {
		writeError(w, r, g.log, errNoCredentials)
		return internalauth.Identity{}, nil, false
	}
	ctx, cancel := context.WithTimeout(r.Context(), resolveTimeout)
	defer cancel()
	var (
		res   app.Resolution
		taken *ratelimit.Result
		err   error
	)
	if lr, ok := g.resolver.(app.LimitingResolver); ok {
		res, taken, err = lr.ResolveAndAllow(ctx, cr, g.limiter)
	} else {
		res, err = g.resolver.Resolve(ctx, cr)
	}
	if err != nil {
		// Fail closed: no identity service, no access.
		writeError(w, r, g.log, &identityUnavailableError{err: err})
		return internalauth.Identity{}, nil, false
	}
	if res.Rejection == "" && res.Identity.OrganizationID == "" {
		// Fail closed on an answer that is neither an identity nor a rejection.
		res.Rejection = errs.Unauthorized
	}
	if res.Rejection != "" && crossSite {
		writeError(w, r, g.log, errUntrustedPage)
		return internalauth.Identity{}, nil, false
	}
	if res.Rejection != "" {
		writeError(w, r, g.log, &rejectedError{code: res.Rejection, message: res.Message})
		return internalauth.Identity{}, nil, false
	}
	return res.Identity, taken, true
}

// The rate-limit headers on every guarded response (docs/API.md, "Rate limits").
const (
	headerLimit     = "RateLimit-Limit"
	headerRemaining = "RateLimit-Remaining"
	headerReset     = "RateLimit-Reset"
)

// limit takes one token from the bucket of (organization, principal) and puts the bucket's
// state on the response, whatever answers it next: the service, a 404, a 413 or this 429.
// A token the guard already took (taken) is used instead of taking another.
func (g *Gateway) limit(w http.ResponseWriter, r *http.Request, id internalauth.Identity, taken *ratelimit.Result) bool {
	var res ratelimit.Result
	if taken != nil {
		res = *taken
	} else {
		res = g.limiter.Allow(r.Context(), id)
	}
	h := w.Header()
	h.Set(headerLimit, strconv.Itoa(res.Limit))
	h.Set(headerRemaining, strconv.Itoa(res.Remaining))
	h.Set(headerReset, strconv.FormatInt(ceilDiv(res.ResetAfter, time.Second), 10))
	if res.Allowed {
		return true
	}
	retryMs := max(ceilDiv(res.RetryAfter, time.Millisecond), 1)
	h.Set("Retry-After", strconv.FormatInt(max(ceilDiv(res.RetryAfter, time.Second), 1), 10))
	writeError(w, r, g.log, &rateLimitedError{retryAfterMs: retryMs})
	return false
}

// ceilDiv is d in units, rounded up; 0 for d <= 0.
func ceilDiv(d, unit time.Duration) int64 {
	if d <= 0 {
		return 0
	}
	return int64((d + unit - 1) / unit)
}

// bufferBody reads a body of unknown length (chunked) into memory so that one over limit is
// refused with 413 before anything reaches a service. Bodies that declare their length were
// already checked by the body-limit middleware and are streamed.
func bufferBody(r *http.Request, limit int64) error {
	if r.Body == nil || r.Body == http.NoBody || r.ContentLength >= 0 {
		return nil
	}
	b, err := io.ReadAll(io.LimitReader(r.Body, limit+1))
	if err != nil {
		var maxErr *http.MaxBytesError
		if errors.As(err, &maxErr) {
			return &bodyTooLargeError{limit: limit}
		}
		return &bodyUnreadableError{err: err}
	}
	if int64(len(b)) > limit {
		return &bodyTooLargeError{limit: limit}
	}
	r.Body = io.NopCloser(bytes.NewReader(b))
	r.ContentLength = int64(len(b))
	r.TransferEncoding = nil // the length is known now; forward it as such
	return nil
}

func (g *Gateway) serveMCP(w http.ResponseWriter, r *http.Request) {
	r = r.WithContext(telemetry.WithRoute(r.Context(), r.Method, mcpPath))
	if err := bufferBody(r, web.MaxBodyBytes); err != nil {
		writeError(w, r, g.log, err)
		return
	}
	// The JSON boundary holds here as for every body a client sends (libs/wire CheckJSON).
	body, _ := io.ReadAll(r.Body) // a bytes reader: cannot fail
	if err := web.CheckJSON(body); err != nil && r.Method == http.MethodPost {
		writeError(w, r, g.log, err)
		return
	}
	r.Body = io.NopCloser(bytes.NewReader(body))
	serveMCPWithJSONErrors(w, r, g.log, g.mcp)
}

// vouchingService is the name the gateway signs its own statements under.
const vouchingService = "gateway"

// vouchFor is what the gateway signs into a request on identity's open routes: no user, only
// the client address it saw. Identity limits sign-in, sign-up and password-reset attempts per
// address and records it with each session, and it listens where a client could reach it
// directly with any X-Forwarded-For it likes; it believes only an address signed this way.
func vouchFor(r *http.Request) internalauth.Identity {
	return internalauth.Identity{AuthMode: internalauth.ModeService, Service: vouchingService, ClientIP: clientIP(r)}
}

// clientIP is the TCP peer's address. X-Forwarded-For is never read: the gateway is the edge.
func clientIP(r *http.Request) string {
	host, _, err := net.SplitHostPort(r.RemoteAddr)
	if err != nil {
		return r.RemoteAddr
	}
	return host
}

// resolveTimeout bounds the guard's call to identity.
const resolveTimeout = 3 * time.Second
