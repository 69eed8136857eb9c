package org

import (
	"context"
)

// Repository stores organizations.
type Repository interface {
	// Add stores a new organization with its members; ErrSlugTaken when the slug is in use.
	Add(ctx context.Context, o *Organization) error
	Get(ctx context.Context, id string) (*Organization, error)
	BySlug(ctx context.Context, slug string) (*Organization, error)
	// ListForUser lists the organizations userID belongs to, in the order they joined.
	ListForUser(ctx context.Context, userID string) ([]Profile, error)
	// OnlyMembership returns userID's single membership; ok is false when the user has none
	// or several.
	OnlyMembership(ctx context.Context, userID string) (m Membership, ok bool, err error)
	// InvitationOrganization returns the organization an invitation belongs to, or
	// ErrInvitationNotFound.
	InvitationOrganization(ctx context.Context, invitationID string) (string, error)
	// Update loads the organization under a row lock, applies updateFunc and saves the
	// changed members and invitations in one transaction.
	Update(ctx context.Context, id string, updateFunc func(ctx context.Context, o *Organization) error) error
}
