package httpapi

import (
	"errors"
	"mime"
	"net/http"
	"strconv"
	"time"

	"svc.dev/libs/web"
	"svc.dev/services/identity/internal/app/command"
	"svc.dev/services/identity/internal/app/port"
)

type bootstrapRequest struct {
	Email            string `json:"email"`
	Password         string `json:"password"`
	Name             string `json:"name"`
	OrganizationName string `json:"organizationName"`
}

// bootstrap is POST /api/bootstrap: 201 with the first user, organization, session token and
// API key while the bootstrap is open, 404 not_found otherwise. It is not under /api/auth, so
// it answers in the service shape. It is a mutation like the auth layer's, and whoever claims
// it owns the system: it needs a trusted Origin (the auth layer's check and codes) and a JSON
// body, so that no cross-site form or simple request from a browser on the operator's network
// can claim it first.
func (s *Server) bootstrap(w http.ResponseWriter, r *http.Request) {
	fail := func(err error) {
		if errors.Is(err, port.ErrHasherBusy) {
			w.Header().Set("Retry-After", strconv.FormatInt(int64(busyRetryAfter/time.Second), 10))
		}
		web.WriteError(w, r, s.log, toBootstrapError(err))
	}
	// Closed answers 404 before the body is even read: nothing about it is revealed.
	open, err := s.app.Commands.Bootstrap.Open(r.Context())
	if err != nil {
		fail(err)
		return
	}
	if !open {
		web.NotFound(w, r)
		return
	}
	if err := s.origins.check(r); err != nil {
		// The auth layer's codes, in both shapes: {code, message} and {error}.
		e := toAuthError(err)
		writeJSON(w, e.Status, map[string]any{"error": e.Code, "code": e.Code, "message": e.Message})
		return
	}
	if !isJSON(r.Header.Get("Content-Type")) {
		fail(errNotJSON)
		return
	}
	var req bootstrapRequest
	if err := decode(r, &req); err != nil {
		fail(err)
		return
	}
	if err := required("email", req.Email); err != nil {
		fail(err)
		return
	}
	if err := required("password", req.Password); err != nil {
		fail(err)
		return
	}
	res, err := s.app.Commands.Bootstrap.Handle(r.Context(), command.Bootstrap{Email: req.Email, Password: req.Password, Name: req.Name,
		OrganizationName: req.OrganizationName, IPAddress: s.clientIP(r), UserAgent: r.UserAgent()})
	if err != nil {
		fail(err)
		return
	}
	s.setSession(w, res.Token, true)
	writeJSON(w, http.StatusCreated, bootstrapResponse{
		User: toUserResponse(res.User), Organization: toOrganizationResponse(res.Organization.Profile()), Token: string(res.Token),
		APIKey: bootstrapKeyResponse{ID: res.Key.ID(), Key: res.RawKey, Start: res.Key.Start()},
	})
}

// isJSON reports whether a Content-Type names JSON (parameters such as charset allowed). A
// browser can send a cross-site request without a preflight only with a form or text type.
func isJSON(contentType string) bool {
	mt, _, err := mime.ParseMediaType(contentType)
	return err == nil && mt == "application/json"
}
