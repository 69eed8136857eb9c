// Package httpapi is the inbound HTTP port of identity: the auth layer under /api/auth/*,
// wire-compatible with better-auth's client (bearer, organization and api-key plugins), and
// /api/bootstrap. It holds the DTOs and their converters, the Origin check, the session
// cookie, and the one table that maps domain errors to public codes.
package httpapi

import (
	"net/http"

	"github.com/gorilla/mux"

	"svc.dev/libs/web"
	"svc.dev/proto/errs"
)

// BootstrapPath is the bootstrap route.
const BootstrapPath = "/api/bootstrap"

// NewRouter returns the router of identity's public routes (README.md lists them). Unknown paths
// answer a JSON 404 and known paths with another method a JSON 405 — except /api/bootstrap,
// which answers 404 not_found to every method but POST.
func NewRouter(s *Server) *mux.Router {
	if s == nil {
		panic("nil server")
	}
	r := web.NewRouter()
	methodNotAllowed := r.MethodNotAllowedHandler
	r.MethodNotAllowedHandler = http.HandlerFunc(func(w http.ResponseWriter, req *http.Request) {
		if req.URL.Path == BootstrapPath {
			web.WriteJSON(w, http.StatusNotFound, errs.New(errs.NotFound, nil).Body())
			return
		}
		methodNotAllowed.ServeHTTP(w, req)
	})

	for _, rt := range []struct {
		method, path string
		h            handlerFunc
	}{
		{http.MethodPost, "/sign-up/email", s.signUp},
		{http.MethodPost, "/sign-in/email", s.signIn},
		{http.MethodPost, "/sign-out", s.signOut},
		{http.MethodGet, "/get-session", s.getSession},
		{http.MethodPost, "/change-password", s.changePassword},
		{http.MethodPost, "/request-password-reset", s.requestPasswordReset},
		{http.MethodPost, "/reset-password", s.resetPassword},
		{http.MethodPost, "/organization/create", s.createOrganization},
		{http.MethodPost, "/organization/set-active", s.setActiveOrganization},
		{http.MethodGet, "/organization/list", s.listOrganizations},
		{http.MethodPost, "/organization/invite-member", s.inviteMember},
		{http.MethodPost, "/organization/accept-invitation", s.acceptInvitation},
		{http.MethodGet, "/organization/list-members", s.listMembers},
		{http.MethodPost, "/organization/remove-member", s.removeMember},
		{http.MethodPost, "/organization/leave", s.leaveOrganization},
		{http.MethodPost, "/api-key/create", s.createAPIKey},
		{http.MethodGet, "/api-key/list", s.listAPIKeys},
		{http.MethodPost, "/api-key/delete", s.deleteAPIKey},
		{http.MethodPost, "/api-key/verify", s.verifyAPIKey},
		{http.MethodDelete, "/api-key/{id}", s.revokeAPIKeyByPath},
	} {
		r.Handle("/api/auth"+rt.path, s.auth(rt.h)).Methods(rt.method)
	}
	r.Handle(BootstrapPath, http.HandlerFunc(s.bootstrap)).Methods(http.MethodPost)
	return r
}
