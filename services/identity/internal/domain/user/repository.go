package user

import (
	"context"
)

// Repository stores users.
type Repository interface {
	Get(ctx context.Context, id string) (*User, error)
	ByEmail(ctx context.Context, email string) (*User, error)
	// Update loads the user under a row lock, applies updateFunc and saves the result (and
	// revokes its sessions when asked, and deletes its reset tokens when its password
	// changed) in one transaction.
	Update(ctx context.Context, id string, updateFunc func(ctx context.Context, u *User) error) error
}
