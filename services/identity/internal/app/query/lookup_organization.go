package query

import (
	"context"
	"errors"
	"fmt"

	"svc.dev/services/identity/internal/domain/org"
)

// LookupOrganization asks which organization has a slug, on behalf of another service
// (webhook-ingress names a route's organization by slug). It carries no caller: the internal
// API is reached only by signed services, and the answer is only the organization's reference.
type LookupOrganization struct{ Slug string }

// OrganizationRef is the public reference of an organization.
type OrganizationRef struct{ ID, Slug string }

// LookupOrganizationHandler answers from storage on every call; caching, if any, is the
// caller's.
type LookupOrganizationHandler struct{ orgs org.Repository }

// NewLookupOrganizationHandler returns the handler.
func NewLookupOrganizationHandler(orgs org.Repository) LookupOrganizationHandler {
	if orgs == nil {
		panic("nil dependency")
	}
	return LookupOrganizationHandler{orgs: orgs}
}

// Handle returns the organization with the slug, or org.ErrNotFound when there is none; a
// string that is not a slug is not found without a lookup. Any other error means storage
// failed.
func (h LookupOrganizationHandler) Handle(ctx context.Context, q LookupOrganization) (OrganizationRef, error) {
	if !org.ValidSlug(q.Slug) {
		return OrganizationRef{}, org.ErrNotFound
	}
	o, err := h.orgs.BySlug(ctx, q.Slug)
	if errors.Is(err, org.ErrNotFound) {
		return OrganizationRef{}, org.ErrNotFound
	}
	if err != nil {
		return OrganizationRef{}, fmt.Errorf("find organization by slug: %w", err)
	}
	p := o.Profile()
	return OrganizationRef{ID: p.ID, Slug: p.Slug}, nil
}
