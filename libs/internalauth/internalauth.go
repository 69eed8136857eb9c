// Package internalauth carries the identity the gateway resolved to the service that owns the
// route. The gateway signs the identity, the request's method, path and query and a timestamp
// with HMAC-SHA256 under SVC_INTERNAL_SECRET; a service trusts those headers only when the
// signature checks and the timestamp is fresh, so a client that reaches a service directly
// cannot claim to be anyone.
package internalauth

import (
	"context"
	"crypto/hmac"
	"crypto/sha256"
	"encoding/base64"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"strconv"
	"time"
)

// The headers the gateway sets. Clients' own copies are always removed at the gateway.
const (
	HeaderIdentity  = "X-Svc-Identity"
	HeaderTimestamp = "X-Svc-Identity-Ts"
	HeaderSignature = "X-Svc-Identity-Sig"
)

// AuthMode says how the caller proved who it is.
type AuthMode string

// The modes of a public request, and the mode of a call from one service to another.
const (
	ModeSession AuthMode = "session"
	ModeAPIKey  AuthMode = "api-key"
	ModeService AuthMode = "service"
)

// Identity is the request context every handler gets (user, organizationId, authMode,
// apiKeyId). Service is set instead for internal calls between services.
type Identity struct {
	UserID         string   `json:"uid,omitempty"`
	Email          string   `json:"email,omitempty"`
	OrganizationID string   `json:"org,omitempty"`
	AuthMode       AuthMode `json:"mode"`
	APIKeyID       string   `json:"key,omitempty"`
	Service        string   `json:"svc,omitempty"`
	// Role is the user's role in the organization ("owner", "admin", "member") when the
	// caller is a session; empty for an API key and between services.
	Role string `json:"role,omitempty"`
	// ClientIP is the client's address as the gateway saw it (the TCP peer), which it vouches
	// for on the open routes it forwards to identity: a service cannot tell it from a
	// client-made X-Forwarded-For otherwise.
	ClientIP string `json:"ip,omitempty"`
}

// Principal is the id a rate limit bucket is kept for: the key for key authentication, the
// user for a session, the calling service for internal calls.
func (id Identity) Principal() string {
	switch id.AuthMode {
	case ModeAPIKey:
		return id.APIKeyID
	case ModeService:
		return id.Service
	default:
		return id.UserID
	}
}

// ErrInvalid is returned for missing, malformed, stale or forged identity headers.
var ErrInvalid = errors.New("internal identity missing or invalid")

// MaxSkew is how old (or how far in the future) a signature may be. Gateway and services run
// on synchronised clocks; the window only bounds the replay of captured headers.
const MaxSkew = 30 * time.Second

// Signer signs and verifies identity headers with one shared secret.
type Signer struct{ key []byte }

// NewSigner returns a Signer; the secret must be at least 32 bytes.
func NewSigner(secret string) (Signer, error) {
	if len(secret) < 32 {
		return Signer{}, errors.New("internal secret must be at least 32 bytes")
	}
	return Signer{key: []byte(secret)}, nil
}

// mac is the signature of one request. A request without a query is signed as it always was
// (svc-identity-v1), so query-less signatures made before the query was covered still
// verify; one with a query is signed under svc-identity-v2 with the query as its own field.
// Either way the message splits one way only: every field but the last is free of newlines
// (the query is base64url-encoded for that), and the path, the only free-form text, is last
// or just before the base64url payload.
func (s Signer) mac(ts, method, path, rawQuery, payload string) []byte {
	m := hmac.New(sha256.New, s.key)
	if rawQuery == "" {
		fmt.Fprintf(m, "svc-identity-v1\n%s\n%s\n%s\n%s", ts, method, path, payload)
	} else {
		fmt.Fprintf(m, "svc-identity-v2\n%s\n%s\n%s\n%s\n%s", ts, method,
			base64.RawURLEncoding.EncodeToString([]byte(rawQuery)), payload, path)
	}
	return m.Sum(nil)
}

// Sign replaces any identity headers in h with id signed for one request (method, path and
// raw query, "" for none) at now.
func (s Signer) Sign(h http.Header, method, path, rawQuery string, id Identity, now time.Time) {
	raw, _ := json.Marshal(id) // a struct of strings always marshals
	payload := base64.RawURLEncoding.EncodeToString(raw)
	ts := strconv.FormatInt(now.UnixMilli(), 10)
	h.Set(HeaderIdentity, payload)
	h.Set(HeaderTimestamp, ts)
	h.Set(HeaderSignature, base64.RawURLEncoding.EncodeToString(s.mac(ts, method, path, rawQuery, payload)))
}

// Verify returns the identity carried by h for the request (method, path and raw query), or
// ErrInvalid: headers signed for another method, path or query do not verify.
func (s Signer) Verify(h http.Header, method, path, rawQuery string, now time.Time) (Identity, error) {
	payload, ts, sig := h.Get(HeaderIdentity), h.Get(HeaderTimestamp), h.Get(HeaderSignature)
	// A zero Signer has no key, and an HMAC under the empty key is anyone's to make.
	if len(s.key) == 0 || payload == "" || ts == "" || sig == "" {
		return Identity{}, ErrInvalid
	}
	ms, err := strconv.ParseInt(ts, 10, 64)
	if err != nil {
		return Identity{}, ErrInvalid
	}
	if skew := now.Sub(time.UnixMilli(ms)); skew > MaxSkew || skew < -MaxSkew {
		return Identity{}, ErrInvalid
	}
	got, err := base64.RawURLEncoding.DecodeString(sig)
	if err != nil || !hmac.Equal(got, s.mac(ts, method, path, rawQuery, payload)) {
		return Identity{}, ErrInvalid
	}
	raw, err := base64.RawURLEncoding.DecodeString(payload)
	if err != nil {
		return Identity{}, ErrInvalid
	}
	var id Identity
	if err := json.Unmarshal(raw, &id); err != nil {
		return Identity{}, ErrInvalid
	}
	return id, nil
}

// Strip removes identity headers, as the gateway does to everything a client sends.
func Strip(h http.Header) {
	h.Del(HeaderIdentity)
	h.Del(HeaderTimestamp)
	h.Del(HeaderSignature)
}

type identityKey struct{}

// WithIdentity returns ctx carrying id.
func WithIdentity(ctx context.Context, id Identity) context.Context {
	return context.WithValue(ctx, identityKey{}, id)
}

// FromContext returns the verified identity of the request.
func FromContext(ctx context.Context) (Identity, bool) {
	id, ok := ctx.Value(identityKey{}).(Identity)
	return id, ok
}
