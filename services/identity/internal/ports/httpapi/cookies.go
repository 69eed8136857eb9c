package httpapi

import (
	"net/http"
	"net/url"

	"svc.dev/services/identity/internal/domain/credential"
	"svc.dev/services/identity/internal/domain/session"
)

// setSession hands a session to the client both ways better-auth does: the cookie
// svc.session_token (the signed token, URL-encoded; HttpOnly, SameSite=Lax, Path=/, Secure
// when the public URL is https) and the set-auth-token header with the signed value, which
// the bearer flow reads (exposed to browsers through Access-Control-Expose-Headers).
// rememberMe false makes the cookie last for the browser session only.
func (s *Server) setSession(w http.ResponseWriter, tok session.Token, rememberMe bool) {
	signed := s.signer.Sign(tok)
	c := &http.Cookie{
		Name: credential.CookieName, Value: url.QueryEscape(signed), Path: "/",
		HttpOnly: true, SameSite: http.SameSiteLaxMode, Secure: s.secure,
	}
	if rememberMe {
		c.MaxAge = int(session.Lifetime.Seconds())
	}
	http.SetCookie(w, c)
	w.Header().Set("Set-Auth-Token", signed)
	w.Header().Set("Access-Control-Expose-Headers", "set-auth-token")
}

// clearSession expires the cookie.
func (s *Server) clearSession(w http.ResponseWriter) {
	http.SetCookie(w, &http.Cookie{Name: credential.CookieName, Value: "", Path: "/", MaxAge: -1,
		HttpOnly: true, SameSite: http.SameSiteLaxMode, Secure: s.secure})
}
