package http

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
	"time"

	"svc.dev/libs/buildinfo"
	"svc.dev/libs/errs"
	"svc.dev/libs/internalauth"
	"svc.dev/libs/web"
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
	routes   []route
	proxies  map[Peer]*httputil.ReverseProxy
	health   http.Handler
}

// NewGateway returns the gateway for the given peers; every peer of the routing table must be
// present.
func NewGateway(log *slog.Logger, resolver app.Resolver, upstreams map[Peer]Upstream) *Gateway {
	if resolver == nil {
		panic("nil resolver")
	}
	g := &Gateway{log: log, resolver: resolver, routes: table(), proxies: map[Peer]*httputil.ReverseProxy{},
		health: web.Health(buildinfo.Version())}
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
		// id, and keeping both would send the header twice.
		ModifyResponse: func(resp *http.Response) error {
			resp.Header.Del(web.RequestIDHeader)
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
			web.WriteJSON(w, http.StatusServiceUnavailable, errs.Newf(errs.Unavailable, "%s is unavailable; retry shortly", peer).Body())
		},
	}
}

// ServeHTTP runs the guard, then routes. Order matters (contract §0): without valid
// credentials a guarded path is 401 whether or not any route has it.
func (g *Gateway) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	p := cleanPath(r.URL.Path)
	if p != r.URL.Path {
		r.URL.Path, r.URL.RawPath = p, ""
	}
	if p == "/health" {
		if r.Method != http.MethodGet && r.Method != http.MethodHead {
			web.WriteJSON(w, http.StatusMethodNotAllowed, errs.New(errs.MethodNotAllowed, nil).Body())
			return
		}
		g.health.ServeHTTP(w, r)
		return
	}
	if !isOpen(g.routes, p) {
		id, ok := g.guard(w, r)
		if !ok {
			return
		}
		// The service gets the signed identity instead of the raw credentials.
		r.Header.Del("Authorization")
		r.Header.Del("Cookie")
		r.Header.Del("X-Api-Key")
		r = r.WithContext(internalauth.WithIdentity(r.Context(), id))
	}
	rt, ok := match(g.routes, p)
	if !ok {
		web.NotFound(w, r)
		return
	}
	if err := bufferBody(r, web.MaxBodyBytes); err != nil {
		web.WriteError(w, r, g.log, err)
		return
	}
	g.proxies[rt.Peer].ServeHTTP(w, r)
}

func (g *Gateway) guard(w http.ResponseWriter, r *http.Request) (internalauth.Identity, bool) {
	cr := app.Credentials{
		Authorization: r.Header.Get("Authorization"),
		Cookie:        r.Header.Get("Cookie"),
		APIKey:        r.Header.Get("X-Api-Key"),
		ClientIP:      clientIP(r),
	}
	if !cr.Present() {
		web.WriteJSON(w, http.StatusUnauthorized, errs.Newf(errs.Unauthorized, "send a session cookie, Authorization: Bearer <token>, or x-api-key").Body())
		return internalauth.Identity{}, false
	}
	ctx, cancel := context.WithTimeout(r.Context(), resolveTimeout)
	defer cancel()
	res, err := g.resolver.Resolve(ctx, cr)
	if err != nil {
		// Fail closed: no identity service, no access.
		web.WriteError(w, r, g.log, errs.New(errs.Unavailable, err).WithMessage("authentication is unavailable; retry shortly"))
		return internalauth.Identity{}, false
	}
	if res.Rejection == "" && res.Identity.OrganizationID == "" {
		// Fail closed on an answer that is neither an identity nor a rejection.
		res.Rejection = errs.Unauthorized
	}
	if res.Rejection != "" {
		web.WriteJSON(w, res.Rejection.Status(), errs.Newf(res.Rejection, "%s", res.Message).Body())
		return internalauth.Identity{}, false
	}
	return res.Identity, true
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
			return errs.Newf(errs.PayloadTooLarge, "request body is larger than %d bytes", limit)
		}
		return errs.New(errs.InvalidBody, err).WithMessage("request body could not be read")
	}
	if int64(len(b)) > limit {
		return errs.Newf(errs.PayloadTooLarge, "request body is larger than %d bytes", limit)
	}
	r.Body = io.NopCloser(bytes.NewReader(b))
	r.ContentLength = int64(len(b))
	r.TransferEncoding = nil // the length is known now; forward it as such
	return nil
}

func clientIP(r *http.Request) string {
	host, _, err := net.SplitHostPort(r.RemoteAddr)
	if err != nil {
		return r.RemoteAddr
	}
	return host
}

// resolveTimeout bounds the guard's call to identity.
const resolveTimeout = 3 * time.Second
