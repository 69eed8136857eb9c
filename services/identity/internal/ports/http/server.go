package http

import (
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
}

// Server serves /api/auth/* and /api/bootstrap.
type Server struct {
	app      app.Application
	signer   session.Signer
	internal internalauth.Signer
	origins  Origins
	secure   bool
	log      *slog.Logger
}

// NewServer returns the server.
func NewServer(a app.Application, cfg Config, log *slog.Logger) *Server {
	if cfg.PublicURL == nil || cfg.Origins == nil || log == nil {
		panic("http: incomplete config")
	}
	return &Server{app: a, signer: cfg.Signer, internal: cfg.Internal, origins: cfg.Origins, secure: cfg.PublicURL.Scheme == "https", log: log}
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
		if err := h(w, r); err != nil {
			s.writeAuthError(w, r, err)
		}
	}
}

// caller authenticates the request's session, if any.
func (s *Server) caller(r *http.Request) (auth.Caller, error) {
	return s.app.Queries.Authenticate.Handle(r.Context(), query.Authenticate{Credentials: s.credentials(r)})
}

func writeJSON(w http.ResponseWriter, status int, v any) { web.WriteJSON(w, status, v) }
