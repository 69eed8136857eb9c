package httpapi

import (
	"bytes"
	"context"
	"log/slog"
	"net/http"
	"net/url"

	"svc.dev/libs/internalauth"
	"svc.dev/libs/web"
	"svc.dev/services/identity/internal/app"
	"svc.dev/services/identity/internal/app/auth"
	"svc.dev/services/identity/internal/app/query"
	"svc.dev/services/identity/internal/domain/session"
)

// Config is what the HTTP port needs beyond the use cases.
type Config struct {
	// PublicURL is the system's public base URL (SVC_PUBLIC_URL); its scheme decides the
	// cookie's Secure attribute.
	PublicURL *url.URL
	// Origins are the trusted origins: the public URL's and SVC_TRUSTED_ORIGINS.
	Origins Origins
	// Signer signs session tokens into cookies.
	Signer session.Signer
	// Internal verifies the client address the gateway signs into the requests it forwards
	// (SVC_INTERNAL_SECRET). The zero Signer verifies nothing: every client is then known
	// by its peer address.
	Internal internalauth.Signer
	// Revocations is bumped after every successful mutating /api/auth/* call, before its
	// answer is sent, so the gateway drops the identities it cached (nil: nothing is bumped).
	Revocations RevocationEpoch
}

// RevocationEpoch is the counter the gateway compares its cached identities against.
type RevocationEpoch interface {
	Bump(ctx context.Context) error
}

// Server serves /api/auth/* and /api/bootstrap.
type Server struct {
	app      app.Application
	signer   session.Signer
	internal internalauth.Signer
	origins  Origins
	secure   bool
	epoch    RevocationEpoch
	log      *slog.Logger
}

// NewServer returns the server.
func NewServer(a app.Application, cfg Config, log *slog.Logger) *Server {
	if cfg.PublicURL == nil || cfg.Origins == nil || log == nil {
		panic("http: incomplete config")
	}
	return &Server{app: a, signer: cfg.Signer, internal: cfg.Internal, origins: cfg.Origins, secure: cfg.PublicURL.Scheme == "https", epoch: cfg.Revocations, log: log}
}

// handlerFunc is a handler that reports failure by returning an error.
type handlerFunc func(w http.ResponseWriter, r *http.Request) error

// auth wraps an /api/auth/* handler: the Origin check for mutating methods first, then the
// handler, whose error goes through the error table once.
func (s *Server) auth(h handlerFunc) http.HandlerFunc {
	return func(w http.ResponseWriter, r *http.Request) {
		if mutating(r.Method) {
			if err := s.origins.check(r); err != nil {
				s.writeAuthError(w, r, err)
				return
			}
		}
		if !mutating(r.Method) || s.epoch == nil {
			if err := h(w, r); err != nil {
				s.writeAuthError(w, r, err)
			}
			return
		}
		// A mutating call may revoke a session or key, or change what a credential resolves
		// to. Its answer is held back until the revocation epoch has moved, so the client's
		// very next request through the gateway cannot be served from a stale cached identity.
		// Every mutating call bumps: none is assumed harmless.
		buf := &bufferedResponse{header: w.Header()}
		if err := h(buf, r); err != nil {
			s.writeAuthError(buf, r, err)
		}
		if buf.status == 0 {
			buf.status = http.StatusOK
		}
		if buf.status < http.StatusBadRequest {
			s.bumpEpoch(r)
		}
		w.WriteHeader(buf.status)
		_, _ = w.Write(buf.body.Bytes())
	}
}

// bumpEpoch increments the revocation epoch, retrying once. If both attempts fail, the
// answer is still sent: the gateway's cached identities then expire by their TTL
// (SVC_GUARD_CACHE_TTL, 5 s by default), and the failure is logged as an error.
func (s *Server) bumpEpoch(r *http.Request) {
	ctx := context.WithoutCancel(r.Context())
	err := s.epoch.Bump(ctx)
	if err == nil {
		return
	}
	if err = s.epoch.Bump(ctx); err != nil {
		s.log.ErrorContext(ctx, "revocation epoch not bumped; gateway caches expire by TTL only", "err", err, "path", r.URL.Path)
	}
}

// bufferedResponse holds a handler's status and body; headers go to the real writer's map,
// which is not sent before WriteHeader.
type bufferedResponse struct {
	header http.Header
	status int
	body   bytes.Buffer
}

func (b *bufferedResponse) Header() http.Header { return b.header }

func (b *bufferedResponse) WriteHeader(status int) {
	if b.status == 0 {
		b.status = status
	}
}

func (b *bufferedResponse) Write(p []byte) (int, error) {
	if b.status == 0 {
		b.status = http.StatusOK
	}
	return b.body.Write(p)
}

// caller authenticates the request's session, if any.
func (s *Server) caller(r *http.Request) (auth.Caller, error) {
	return s.app.Queries.Authenticate.Handle(r.Context(), query.Authenticate{Credentials: s.credentials(r)})
}

func writeJSON(w http.ResponseWriter, status int, v any) { web.WriteJSON(w, status, v) }
