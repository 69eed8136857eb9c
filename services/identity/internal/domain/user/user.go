// Package user models a person who signs in: their address, name and password credential, and
// the rules a password must follow. A password change can ask for every session of the user
// to be revoked; the repository applies that in the same transaction as the new password.
package user

import (
	"errors"
	"fmt"
	"net/mail"
	"strings"
	"time"
	"unicode"
	"unicode/utf8"

	"svc.dev/libs/wire"
)

// The errors of users and their passwords.
var (
	ErrNotFound         = errors.New("user not found")
	ErrEmailTaken       = errors.New("a user with this email already exists")
	ErrInvalidEmail     = errors.New("email must be a valid address")
	ErrInvalidName      = errors.New("name must be at most 100 characters of UTF-8 text")
	ErrPasswordTooShort = fmt.Errorf("password must be at least %d characters", MinPasswordLength)
	ErrPasswordTooLong  = fmt.Errorf("password must be at most %d characters", MaxPasswordLength)
)

// The password length rule, counted in characters.
const (
	MinPasswordLength = 8
	MaxPasswordLength = 128
)

// CheckPassword enforces the length rule.
func CheckPassword(p string) error {
	switch n := utf8.RuneCountInString(p); {
	case n < MinPasswordLength:
		return ErrPasswordTooShort
	case n > MaxPasswordLength:
		return ErrPasswordTooLong
	}
	return nil
}

// CheckName enforces the display name rule: at most 100 characters of UTF-8 text without NUL
// (surrounding spaces do not count; New trims them).
func CheckName(name string) error {
	name = strings.TrimSpace(name)
	if utf8.RuneCountInString(name) > 100 || !utf8.ValidString(name) || strings.ContainsRune(name, 0) {
		return ErrInvalidName
	}
	return nil
}

// NormalizeEmail trims and lower-cases an address and checks that it is one: the address is
// the user's sign-in name, so "A@x.io" and "a@x.io" are the same person.
func NormalizeEmail(raw string) (string, error) {
	if !utf8.ValidString(raw) { // ToLower would quietly turn the bad bytes into U+FFFD
		return "", ErrInvalidEmail
	}
	e := strings.ToLower(strings.TrimSpace(raw))
	if e == "" || len(e) > 254 || strings.ContainsAny(e, " <>\"") || strings.IndexFunc(e, unicode.IsControl) >= 0 {
		return "", ErrInvalidEmail
	}
	addr, err := mail.ParseAddress(e)
	if err != nil || addr.Address != e {
		return "", ErrInvalidEmail
	}
	at := strings.LastIndexByte(e, '@')
	if at < 1 || at == len(e)-1 {
		return "", ErrInvalidEmail
	}
	return e, nil
}

// User is a person with a password credential.
type User struct {
	id            string
	email         string
	name          string
	emailVerified bool
	passwordHash  string
	createdAt     time.Time
	updatedAt     time.Time
	// revokeSessions asks the repository to delete every session of the user when it saves.
	revokeSessions bool
	// passwordChanged asks the repository to delete every reset token of the user when it
	// saves: a link mailed before the change must not undo it.
	passwordChanged bool
}

// New validates a new user. passwordHash is the encoded hash of the already checked password.
func New(email, name, passwordHash string, now time.Time) (*User, error) {
	e, err := NormalizeEmail(email)
	if err != nil {
		return nil, err
	}
	name = strings.TrimSpace(name)
	if err := CheckName(name); err != nil {
		return nil, err
	}
	if passwordHash == "" {
		return nil, errors.New("user: empty password hash")
	}
	now = now.UTC().Truncate(time.Millisecond)
	return &User{id: wire.NewID(wire.User), email: e, name: name, passwordHash: passwordHash, createdAt: now, updatedAt: now}, nil
}

// UnmarshalFromDatabase rebuilds a stored user. Only adapters call it; it is not a constructor.
func UnmarshalFromDatabase(id, email, name string, emailVerified bool, passwordHash string, createdAt, updatedAt time.Time) *User {
	return &User{id: id, email: email, name: name, emailVerified: emailVerified, passwordHash: passwordHash,
		createdAt: createdAt.UTC(), updatedAt: updatedAt.UTC()}
}

// ID is the user's id.
func (u *User) ID() string { return u.id }

// Email is the normalised address.
func (u *User) Email() string { return u.email }

// Name is the display name, possibly empty.
func (u *User) Name() string { return u.name }

// EmailVerified reports whether the address was confirmed (never, today: there is no mail loop).
func (u *User) EmailVerified() bool { return u.emailVerified }

// PasswordHash is the encoded hash of the password credential.
func (u *User) PasswordHash() string { return u.passwordHash }

// CreatedAt is when the user signed up.
func (u *User) CreatedAt() time.Time { return u.createdAt }

// UpdatedAt is when the user last changed.
func (u *User) UpdatedAt() time.Time { return u.updatedAt }

// RevokesSessions reports whether saving the user must delete all of its sessions.
func (u *User) RevokesSessions() bool { return u.revokeSessions }

// PasswordChanged reports whether saving the user must delete all of its reset tokens.
func (u *User) PasswordChanged() bool { return u.passwordChanged }

// ChangePassword replaces the credential. With revokeSessions every session of the user dies
// in the same transaction: a password reset signs out all devices, and a change that asks to
// revoke the others does too (the caller then starts a fresh session). Every reset link of
// the user dies with any change, in the same transaction: one mailed earlier (to an inbox that
// may be the reason for the change) cannot set the password back.
func (u *User) ChangePassword(passwordHash string, revokeSessions bool, now time.Time) {
	u.passwordHash = passwordHash
	u.revokeSessions = u.revokeSessions || revokeSessions
	u.passwordChanged = true
	u.updatedAt = now.UTC().Truncate(time.Millisecond)
}
