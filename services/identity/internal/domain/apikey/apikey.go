// Package apikey models an organization-owned API key: "svc_" followed by 64 random letters,
// shown once at creation and stored only as base64url(SHA-256(key)), with its first six
// characters kept so that people can tell their keys apart.
package apikey

import (
	"errors"
	"math"
	"strings"
	"time"
	"unicode/utf8"

	"svc.dev/libs/wire"
	"svc.dev/services/identity/internal/domain/secret"
)

// The errors of API keys.
var (
	ErrNotFound      = errors.New("API key not found")
	ErrInvalidName   = errors.New("name must be at most 64 characters of UTF-8 text")
	ErrInvalidExpiry = errors.New("expiresIn must be a whole number of seconds from 1 to 315360000 (ten years)")
	ErrInvalidPrefix = errors.New(`prefix must be "svc_": keys always start with it`)
	ErrNotUsable     = errors.New("API key is disabled or expired")
	// ErrTooManyKeys and ErrTooManyKeysOfUser are a key past the organization's or its
	// creator's ceiling (port.Ceilings), which the repository enforces.
	ErrTooManyKeys       = errors.New("the organization has reached the maximum number of API keys")
	ErrTooManyKeysOfUser = errors.New("you have reached the maximum number of API keys")
	errEmptyReference    = errors.New("apikey: empty organization id")
)

// The shape of a key: svc_ and 64 random letters.
const (
	Prefix       = "svc_"
	RandomLength = 64
	StartLength  = 6
	// MaxExpiresIn bounds a key's lifetime when one is asked for.
	MaxExpiresIn = 10 * 365 * 24 * time.Hour
)

// WellFormed reports whether raw has the shape of a key, so that garbage never costs a lookup.
func WellFormed(raw string) bool {
	rest, ok := strings.CutPrefix(raw, Prefix)
	return ok && len(rest) == RandomLength && secret.Only(rest, secret.Letters)
}

// Hash is the stored form of a raw key: unpadded base64url of its SHA-256 (better-auth's).
func Hash(raw string) string { return secret.SHA256URL(raw) }

// APIKey is one key of an organization.
type APIKey struct {
	id             string
	name           string
	start          string
	hash           string
	organizationID string
	createdBy      string
	enabled        bool
	expiresAt      time.Time
	lastRequest    time.Time
	createdAt      time.Time
	updatedAt      time.Time
}

// Lifetime is better-auth's expiresIn, a number of seconds, as a key lifetime for New: a
// whole number from 1 to MaxExpiresIn in seconds, else ErrInvalidExpiry. (Absent means a key
// that never expires, which is New's 0, not a number of seconds.)
func Lifetime(seconds float64) (time.Duration, error) {
	if seconds != math.Trunc(seconds) || seconds < 1 || seconds > MaxExpiresIn.Seconds() {
		return 0, ErrInvalidExpiry
	}
	return time.Duration(seconds) * time.Second, nil
}

// validLifetime is the rule of a key's lifetime: whole seconds, from one to MaxExpiresIn.
func validLifetime(d time.Duration) bool {
	return d >= time.Second && d <= MaxExpiresIn && d%time.Second == 0
}

// New mints a key for organizationID on behalf of createdBy (a user id, or "" for none) and
// returns it with the raw key, which exists nowhere else. expiresIn 0 means never; otherwise
// it is a whole number of seconds up to MaxExpiresIn.
func New(name, organizationID, createdBy string, expiresIn time.Duration, now time.Time) (*APIKey, string, error) {
	if organizationID == "" {
		return nil, "", errEmptyReference
	}
	name = strings.TrimSpace(name)
	if utf8.RuneCountInString(name) > 64 || !utf8.ValidString(name) || strings.ContainsRune(name, 0) {
		return nil, "", ErrInvalidName
	}
	if expiresIn != 0 && !validLifetime(expiresIn) {
		return nil, "", ErrInvalidExpiry
	}
	now = now.UTC().Truncate(time.Millisecond)
	raw := Prefix + secret.Random(RandomLength, secret.Letters)
	k := &APIKey{
		id: wire.NewID(wire.APIKey), name: name, start: raw[:StartLength], hash: Hash(raw),
		organizationID: organizationID, createdBy: createdBy, enabled: true, createdAt: now, updatedAt: now,
	}
	if expiresIn > 0 {
		k.expiresAt = now.Add(expiresIn)
	}
	return k, raw, nil
}

// UnmarshalFromDatabase rebuilds a stored key. Only adapters call it.
func UnmarshalFromDatabase(id, name, start, hash, organizationID, createdBy string, enabled bool,
	expiresAt, lastRequest, createdAt, updatedAt time.Time,
) *APIKey {
	return &APIKey{id: id, name: name, start: start, hash: hash, organizationID: organizationID, createdBy: createdBy,
		enabled: enabled, expiresAt: utc(expiresAt), lastRequest: utc(lastRequest), createdAt: createdAt.UTC(), updatedAt: updatedAt.UTC()}
}

func utc(t time.Time) time.Time {
	if t.IsZero() {
		return t
	}
	return t.UTC()
}

// ID is the key's id.
func (k *APIKey) ID() string { return k.id }

// Name is the label given at creation, possibly empty.
func (k *APIKey) Name() string { return k.name }

// Start is the first six characters of the raw key.
func (k *APIKey) Start() string { return k.start }

// Hash is the stored digest of the raw key.
func (k *APIKey) Hash() string { return k.hash }

// OrganizationID owns the key (better-auth's referenceId).
func (k *APIKey) OrganizationID() string { return k.organizationID }

// CreatedBy is the user who minted the key, or "".
func (k *APIKey) CreatedBy() string { return k.createdBy }

// Enabled reports whether the key may be used.
func (k *APIKey) Enabled() bool { return k.enabled }

// ExpiresAt is when the key stops working; zero means never.
func (k *APIKey) ExpiresAt() time.Time { return k.expiresAt }

// LastRequest is the last recorded use; zero means never used.
func (k *APIKey) LastRequest() time.Time { return k.lastRequest }

// CreatedAt is the creation time.
func (k *APIKey) CreatedAt() time.Time { return k.createdAt }

// UpdatedAt is the last change.
func (k *APIKey) UpdatedAt() time.Time { return k.updatedAt }

// Usable reports whether the key authorizes requests at now.
func (k *APIKey) Usable(now time.Time) bool {
	return k.enabled && (k.expiresAt.IsZero() || now.Before(k.expiresAt))
}
