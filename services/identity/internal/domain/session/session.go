// Package session models a signed-in device: a random token (stored only as its SHA-256
// digest), the user, the active organization and a sliding expiry. It also signs tokens
// for the session cookie, the way better-auth does, so that a cookie cannot be forged
// without the secret.
package session

import (
	"crypto/hmac"
	"crypto/sha256"
	"encoding/base64"
	"errors"
	"net/url"
	"strings"
	"time"
	"unicode/utf8"

	"svc.dev/libs/wire"
	"svc.dev/services/identity/internal/domain/secret"
)

// ErrNotFound is returned for a token no live session has.
var ErrNotFound = errors.New("session not found")

// The sliding expiry: a session lives Lifetime after its last refresh, and a
// use more than RefreshAge after that refresh extends it again. Refreshing on every use would
// cost a write per request; once a day costs almost nothing and loses at most a day.
const (
	Lifetime   = 7 * 24 * time.Hour
	RefreshAge = 24 * time.Hour
)

// TokenLength is the number of random alphanumerics of a token.
const TokenLength = 32

// Token is a raw session token. It is shown to the client once per sign-in and never stored.
type Token string

// NewToken draws a fresh token.
func NewToken() Token { return Token(secret.Random(TokenLength, secret.Alphanumeric)) }

// ParseToken accepts s when it has the form of a token: 32 alphanumerics.
func ParseToken(s string) (Token, bool) {
	if len(s) != TokenLength || !secret.Only(s, secret.Alphanumeric) {
		return "", false
	}
	return Token(s), true
}

// Hash is what is stored and looked up: SHA-256 of the token.
func (t Token) Hash() []byte { return secret.SHA256(string(t)) }

// Signer signs tokens with HMAC-SHA256 under the cookie secret.
type Signer struct{ key []byte }

// NewSigner returns a signer; the secret must be at least 32 bytes.
func NewSigner(key []byte) (Signer, error) {
	if len(key) < 32 {
		return Signer{}, errors.New("session: signing secret must be at least 32 bytes")
	}
	return Signer{key: append([]byte(nil), key...)}, nil
}

func (s Signer) mac(t string) []byte {
	m := hmac.New(sha256.New, s.key)
	m.Write([]byte(t))
	return m.Sum(nil)
}

// Sign returns token + "." + base64std(HMAC-SHA256(secret, token)): better-auth's signed
// cookie value, before URL encoding.
func (s Signer) Sign(t Token) string {
	return string(t) + "." + base64.StdEncoding.EncodeToString(s.mac(string(t)))
}

// Verify checks a signed value (URL-encoded or not) and returns its token. The signature is
// compared in constant time.
func (s Signer) Verify(signed string) (Token, bool) {
	if len(s.key) == 0 || len(signed) > 256 {
		return "", false
	}
	if strings.Contains(signed, "%") {
		dec, err := url.QueryUnescape(signed)
		if err != nil {
			return "", false
		}
		signed = dec
	}
	raw, sig, ok := strings.Cut(signed, ".")
	if !ok {
		return "", false
	}
	t, ok := ParseToken(raw)
	if !ok {
		return "", false
	}
	got, err := base64.StdEncoding.DecodeString(sig)
	if err != nil || !hmac.Equal(got, s.mac(raw)) {
		return "", false
	}
	return t, true
}

// Session is one signed-in device of a user.
type Session struct {
	id          string
	tokenHash   []byte
	userID      string
	activeOrgID string
	// activeCleared records that the user unset the active organization on purpose, so that
	// it is not chosen for them again until they pick one.
	activeCleared bool
	expiresAt     time.Time
	ipAddress     string
	userAgent     string
	createdAt     time.Time
	updatedAt     time.Time
}

// New starts a session for userID with activeOrgID (may be empty) and returns it with its
// raw token, which exists nowhere else.
func New(userID, activeOrgID, ipAddress, userAgent string, now time.Time) (*Session, Token) {
	if userID == "" {
		panic("session: empty user id")
	}
	now = now.UTC().Truncate(time.Millisecond)
	tok := NewToken()
	return &Session{
		id: wire.NewID(wire.Session), tokenHash: tok.Hash(), userID: userID, activeOrgID: activeOrgID,
		expiresAt: now.Add(Lifetime), ipAddress: clean(ipAddress, 64), userAgent: clean(userAgent, 512),
		createdAt: now, updatedAt: now,
	}, tok
}

// clean makes a string the client chose (its User-Agent; its address when no gateway vouches
// for one) storable: invalid UTF-8 becomes U+FFFD and NULs go, both of which Postgres refuses
// in text, and it is cut to at most n bytes on a character boundary.
func clean(s string, n int) string {
	s = strings.ReplaceAll(strings.ToValidUTF8(s, "\uFFFD"), "\x00", "")
	if len(s) <= n {
		return s
	}
	for n > 0 && !utf8.RuneStart(s[n]) {
		n--
	}
	return s[:n]
}

// UnmarshalFromDatabase rebuilds a stored session. Only adapters call it.
func UnmarshalFromDatabase(id string, tokenHash []byte, userID, activeOrgID string, activeCleared bool,
	expiresAt time.Time, ipAddress, userAgent string, createdAt, updatedAt time.Time,
) *Session {
	return &Session{id: id, tokenHash: tokenHash, userID: userID, activeOrgID: activeOrgID, activeCleared: activeCleared,
		expiresAt: expiresAt.UTC(), ipAddress: ipAddress, userAgent: userAgent, createdAt: createdAt.UTC(), updatedAt: updatedAt.UTC()}
}

// ID is the session's id.
func (s *Session) ID() string { return s.id }

// TokenHash is the stored digest of the token.
func (s *Session) TokenHash() []byte { return s.tokenHash }

// UserID is the signed-in user.
func (s *Session) UserID() string { return s.userID }

// ActiveOrganizationID is the selected organization, or "".
func (s *Session) ActiveOrganizationID() string { return s.activeOrgID }

// ActiveCleared reports whether the user unset the active organization on purpose.
func (s *Session) ActiveCleared() bool { return s.activeCleared }

// ExpiresAt is when the session ends unless used.
func (s *Session) ExpiresAt() time.Time { return s.expiresAt }

// IPAddress is the client address at sign-in.
func (s *Session) IPAddress() string { return s.ipAddress }

// UserAgent is the client's User-Agent at sign-in.
func (s *Session) UserAgent() string { return s.userAgent }

// CreatedAt is the sign-in time.
func (s *Session) CreatedAt() time.Time { return s.createdAt }

// UpdatedAt is the last refresh or change.
func (s *Session) UpdatedAt() time.Time { return s.updatedAt }

// Expired reports whether the session is over at now.
func (s *Session) Expired(now time.Time) bool { return !now.Before(s.expiresAt) }

// NeedsRefresh reports whether a use at now extends the session: more than RefreshAge has
// passed since it was last refreshed (its expiry minus Lifetime).
func (s *Session) NeedsRefresh(now time.Time) bool {
	return now.Sub(s.expiresAt.Add(-Lifetime)) > RefreshAge
}

// Refresh extends the session to now + Lifetime.
func (s *Session) Refresh(now time.Time) {
	now = now.UTC().Truncate(time.Millisecond)
	s.expiresAt = now.Add(Lifetime)
	s.updatedAt = now
}

// SetActiveOrganization selects orgID.
func (s *Session) SetActiveOrganization(orgID string, now time.Time) {
	s.activeOrgID, s.activeCleared = orgID, false
	s.updatedAt = now.UTC().Truncate(time.Millisecond)
}

// ClearActiveOrganization unsets the active organization on the user's request; domain
// routes then answer no_active_organization until one is set again.
func (s *Session) ClearActiveOrganization(now time.Time) {
	s.activeOrgID, s.activeCleared = "", true
	s.updatedAt = now.UTC().Truncate(time.Millisecond)
}
