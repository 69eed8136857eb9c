package http

import (
	"net/http"

	"svc.dev/libs/web"
	"svc.dev/services/identity/internal/app/command"
)

type bootstrapRequest struct {
	Email            string `json:"email"`
	Password         string `json:"password"`
	Name             string `json:"name"`
	OrganizationName string `json:"organizationName"`
}

// bootstrap is POST /api/bootstrap: 201 with the first user, organization, session token and
// API key while the bootstrap is open, 404 not_found otherwise. It is not under /api/auth, so
// it answers in the service shape and needs no Origin (an operator's script calls it).
func (s *Server) bootstrap(w http.ResponseWriter, r *http.Request) {
	fail := func(err error) { web.WriteError(w, r, s.log, toBootstrapError(err)) }
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
		OrganizationName: req.OrganizationName, IPAddress: clientIP(r), UserAgent: r.UserAgent()})
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
