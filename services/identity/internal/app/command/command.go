// Package command holds identity's use cases that change state, one file each: sign-up,
// sign-in and sign-out, passwords, organizations and their members, API keys and the
// bootstrap.
package command

import (
	"time"

	"svc.dev/services/identity/internal/domain/org"
	"svc.dev/services/identity/internal/domain/session"
	"svc.dev/services/identity/internal/domain/user"
)

// SessionResult is a user with the session just started for them and its raw token.
type SessionResult struct {
	User    *user.User
	Session *session.Session
	Token   session.Token
}

// person is how an organization sees u.
func person(u *user.User) org.Person { return org.Person{ID: u.ID(), Email: u.Email(), Name: u.Name()} }

func mustClock(now func() time.Time) {
	if now == nil {
		panic("nil clock")
	}
}
