// Package credential reads the credentials a request presents — the Authorization header,
// the session cookie and the x-api-key header — into candidates for lookup. It only checks
// form and signatures; whether a candidate names a live session or key is storage's answer.
// Malformed values are dropped here, so garbage never costs a database lookup.
package credential

import (
	"strings"

	"svc.dev/services/identity/internal/domain/apikey"
	"svc.dev/services/identity/internal/domain/session"
)

// CookieName is the session cookie (better-auth's "<prefix>.session_token" with prefix svc).
const CookieName = "svc.session_token"

// maxHeader bounds the header values looked at; anything longer is not a credential of ours.
const maxHeader = 8 << 10

// Credentials are the candidates of one request, in the order they are resolved:
// sessions first (bearer token, then cookie), then API keys (bearer, then x-api-key).
type Credentials struct {
	// Sessions are well-formed session tokens whose signature, when signed, checked.
	Sessions []session.Token
	// APIKeys are well-formed API keys.
	APIKeys []string
	// SessionPresented says a session cookie or a non-key bearer token was sent at all.
	SessionPresented bool
	// APIKeyPresented says an API key was sent at all, well-formed or not.
	APIKeyPresented bool
}

// Empty reports whether nothing worth looking up was presented.
func (c Credentials) Empty() bool { return len(c.Sessions) == 0 && len(c.APIKeys) == 0 }

// Parse reads the three header values (empty when absent).
func Parse(authorization, cookie, xAPIKey string, signer session.Signer) Credentials {
	var c Credentials
	if tok, ok := Bearer(authorization); ok {
		if strings.HasPrefix(tok, apikey.Prefix) {
			c.APIKeyPresented = true
			if apikey.WellFormed(tok) {
				c.APIKeys = append(c.APIKeys, tok)
			}
		} else {
			c.SessionPresented = true
			if t, ok := SessionToken(tok, signer); ok {
				c.Sessions = append(c.Sessions, t)
			}
		}
	}
	if v, ok := Cookie(cookie, CookieName); ok {
		c.SessionPresented = true
		// A cookie is always signed: an unsigned token in a cookie is not ours.
		if t, ok := signer.Verify(v); ok && !containsToken(c.Sessions, t) {
			c.Sessions = append(c.Sessions, t)
		}
	}
	if k := strings.TrimSpace(xAPIKey); k != "" {
		c.APIKeyPresented = true
		if apikey.WellFormed(k) && !containsString(c.APIKeys, k) {
			c.APIKeys = append(c.APIKeys, k)
		}
	}
	return c
}

// Bearer returns the token of an "Authorization: Bearer <token>" value; the scheme is
// case-insensitive, as in better-auth's bearer plugin.
func Bearer(authorization string) (string, bool) {
	if len(authorization) > maxHeader || len(authorization) < 7 || !strings.EqualFold(authorization[:7], "bearer ") {
		return "", false
	}
	tok := strings.TrimSpace(authorization[7:])
	return tok, tok != ""
}

// SessionToken accepts a bearer session token in either form better-auth issues: the raw
// token, or the signed cookie value (URL-encoded or not), whose signature must check.
func SessionToken(v string, signer session.Signer) (session.Token, bool) {
	if strings.ContainsAny(v, ".%") {
		return signer.Verify(v)
	}
	return session.ParseToken(v)
}

// Cookie returns the value of the first cookie called name in a Cookie header, unquoted.
func Cookie(header, name string) (string, bool) {
	if len(header) > maxHeader {
		return "", false
	}
	for part := range strings.SplitSeq(header, ";") {
		k, v, ok := strings.Cut(strings.TrimSpace(part), "=")
		if !ok || strings.TrimSpace(k) != name {
			continue
		}
		v = strings.TrimSpace(v)
		if len(v) >= 2 && v[0] == '"' && v[len(v)-1] == '"' {
			v = v[1 : len(v)-1]
		}
		return v, v != ""
	}
	return "", false
}

func containsToken(ts []session.Token, t session.Token) bool {
	for _, x := range ts {
		if x == t {
			return true
		}
	}
	return false
}

func containsString(ss []string, s string) bool {
	for _, x := range ss {
		if x == s {
			return true
		}
	}
	return false
}
