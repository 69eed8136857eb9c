package httpapi

import (
	"net/http"

	"svc.dev/services/identity/internal/app/command"
)

type signUpRequest struct {
	Email      string `json:"email"`
	Password   string `json:"password"`
	Name       string `json:"name"`
	RememberMe *bool  `json:"rememberMe"`
}

func (s *Server) signUp(w http.ResponseWriter, r *http.Request) error {
	var req signUpRequest
	if err := decode(r, &req); err != nil {
		return err
	}
	if err := required("email", req.Email); err != nil {
		return err
	}
	if err := required("password", req.Password); err != nil {
		return err
	}
	res, err := s.app.Commands.SignUp.Handle(r.Context(), command.SignUp{Email: req.Email, Password: req.Password, Name: req.Name,
		IPAddress: s.clientIP(r), UserAgent: r.UserAgent()})
	if err != nil {
		return err
	}
	s.setSession(w, res.Token, req.RememberMe == nil || *req.RememberMe)
	tok := string(res.Token)
	writeJSON(w, http.StatusOK, tokenResponse{Token: &tok, User: toUserResponse(res.User)})
	return nil
}

type signInRequest struct {
	Email      string `json:"email"`
	Password   string `json:"password"`
	RememberMe *bool  `json:"rememberMe"`
}

func (s *Server) signIn(w http.ResponseWriter, r *http.Request) error {
	var req signInRequest
	if err := decode(r, &req); err != nil {
		return err
	}
	if err := required("email", req.Email); err != nil {
		return err
	}
	if err := required("password", req.Password); err != nil {
		return err
	}
	res, err := s.app.Commands.SignIn.Handle(r.Context(), command.SignIn{Email: req.Email, Password: req.Password,
		IPAddress: s.clientIP(r), UserAgent: r.UserAgent()})
	if err != nil {
		return err
	}
	s.setSession(w, res.Token, req.RememberMe == nil || *req.RememberMe)
	tok, redirect := string(res.Token), false
	writeJSON(w, http.StatusOK, tokenResponse{Redirect: &redirect, Token: &tok, User: toUserResponse(res.User)})
	return nil
}

func (s *Server) signOut(w http.ResponseWriter, r *http.Request) error {
	var req struct{}
	if err := decode(r, &req); err != nil {
		return err
	}
	c, err := s.caller(r)
	if err != nil {
		return err
	}
	if err := s.app.Commands.SignOut.Handle(r.Context(), command.SignOut{Caller: c}); err != nil {
		return err
	}
	s.clearSession(w)
	writeJSON(w, http.StatusOK, successResponse{Success: true})
	return nil
}

// getSession answers {session, user}, or JSON null without a live session. A use that moved
// the sliding expiry sets the cookie again, so a browser's cookie keeps up with the session.
func (s *Server) getSession(w http.ResponseWriter, r *http.Request) error {
	c, err := s.caller(r)
	if err != nil {
		return err
	}
	w.Header().Set("Cache-Control", "no-store")
	if c.Record == nil {
		writeJSON(w, http.StatusOK, nil)
		return nil
	}
	if c.Refreshed {
		s.setSession(w, c.Token, true)
	}
	writeJSON(w, http.StatusOK, getSessionResponse{Session: toSessionResponse(c.Record.Session, c.Token), User: toUserResponse(c.Record.User)})
	return nil
}
