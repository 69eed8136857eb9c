// Package organization resolves a route's organization setting into an organization id.
//
// The contract names a route's organization by slug, which identity must resolve; identity's
// internal API (identity.v1) has no lookup by slug yet. Until it has, routes name their
// organization by id (org_...), which this directory accepts as it is: an id needs no lookup,
// and a route configured before its organization exists starts working once it does (the
// orchestrator finds no workflow until then).
package organization

import (
	"context"
	"fmt"

	"svc.dev/libs/wire"
	"svc.dev/services/webhook-ingress/internal/app"
)

// IDDirectory is the app.Organizations that takes organization ids.
type IDDirectory struct{}

// Resolve implements app.Organizations: an organization id is its own answer; anything else is
// not found.
func (IDDirectory) Resolve(_ context.Context, ref string) (string, error) {
	if !IsID(ref) {
		return "", fmt.Errorf("organization %q: %w", ref, app.ErrOrganizationNotFound)
	}
	return ref, nil
}

// IsID reports whether ref is an organization id rather than a slug.
func IsID(ref string) bool { return wire.ValidID(wire.Organization, ref) }
