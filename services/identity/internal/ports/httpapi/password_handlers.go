package httpapi

import (
	"net/http"
	"net/url"
	"strings"

	"svc.dev/libs/web"
	"svc.dev/services/identity/internal/app/auth"
	"svc.dev/services/identity/internal/app/command"
)

type changePasswordRequest struct {
	CurrentPassword     string `json:"currentPassword"`
	NewPassword         string `json:"newPassword"`
	RevokeOtherSessions bool   `json:"revokeOtherSessions"`
}

func (s *Server) changePassword(w http.ResponseWriter, r *http.Request) error {
	var req changePasswordRequest
	if err := decode(r, &req); err != nil {
		return err
	}
	c, err := s.caller(r)
	if err != nil {
		return err
	}
	if _, err := c.RequireSession(); err != nil {
		return err
	}
	if err := required("currentPassword", req.CurrentPassword); err != nil {
		return err
	}
	if err := required("newPassword", req.NewPassword); err != nil {
		return err
	}
	res, err := s.app.Commands.ChangePassword.Handle(r.Context(), command.ChangePassword{Caller: c, CurrentPassword: req.CurrentPassword,
		NewPassword: req.NewPassword, RevokeOtherSessions: req.RevokeOtherSessions, IPAddress: s.clientIP(r), UserAgent: r.UserAgent()})
	if err != nil {
		return err
	}
	out := tokenResponse{User: toUserResponse(res.User)}
	if res.Session != nil {
		s.setSession(w, res.Token, true)
		tok := string(res.Token)
		out.Token = &tok
	}
	writeJSON(w, http.StatusOK, out)
	return nil
}

type requestPasswordResetRequest struct {
	Email      string `json:"email"`
	RedirectTo string `json:"redirectTo"`
}

func (s *Server) requestPasswordReset(w http.ResponseWriter, r *http.Request) error {
	var req requestPasswordResetRequest
	if err := decode(r, &req); err != nil {
		return err
	}
	if err := required("email", req.Email); err != nil {
		return err
	}
	if req.RedirectTo != "" && !s.trustedRedirect(req.RedirectTo) {
		return auth.Invalid("redirectTo", "must be a path or a URL on a trusted origin")
	}
	err := s.app.Commands.RequestPasswordReset.Handle(r.Context(), command.RequestPasswordReset{Email: req.Email, RedirectTo: req.RedirectTo,
		IPAddress: s.clientIP(r)})
	if err != nil {
		return err
	}
	writeJSON(w, http.StatusOK, statusResponse{Status: true, Message: "If this email exists in our system, check your email for the reset link"})
	return nil
}

// trustedRedirect accepts a same-site path ("/reset", not "//evil") or a URL on a trusted
// origin, so that a reset link never leads off-site with its token.
func (s *Server) trustedRedirect(v string) bool {
	if strings.HasPrefix(v, "/") && !strings.HasPrefix(v, "//") && !strings.Contains(v, `\`) {
		_, err := url.Parse(v)
		return err == nil
	}
	n, ok := web.NormalizeOrigin(v)
	return ok && s.origins[n]
}

type resetPasswordRequest struct {
	Token       string `json:"token"`
	NewPassword string `json:"newPassword"`
}

func (s *Server) resetPassword(w http.ResponseWriter, r *http.Request) error {
	var req resetPasswordRequest
	if err := decode(r, &req); err != nil {
		return err
	}
	if req.Token == "" {
		req.Token = r.URL.Query().Get("token") // better-auth accepts it in the query too
	}
	if err := required("newPassword", req.NewPassword); err != nil {
		return err
	}
	err := s.app.Commands.ResetPassword.Handle(r.Context(), command.ResetPassword{Token: req.Token, NewPassword: req.NewPassword,
		IPAddress: s.clientIP(r)})
	if err != nil {
		return err
	}
	writeJSON(w, http.StatusOK, statusResponse{Status: true})
	return nil
}
