package app

import (
	"context"

	"svc.dev/libs/internalauth"
)

// StreamCeiling is one count an open run event stream is held under: the set of slots named
// Key, of which at most Max may be taken at once. Scope says whose set it is, for the
// refusal's message; the slots' store ignores it.
type StreamCeiling struct {
	Scope StreamScope
	Key   string
	Max   int
}

// StreamSlots caps the run event streams open across every gateway replica: a stream takes a
// slot under each of its ceilings while it is open.
type StreamSlots interface {
	// Take takes one slot under every ceiling, or none, for as long as ctx lives, and gives
	// them back when ctx ends. full is the index of the first ceiling that has no slot left
	// (nothing is taken then), or -1 when the slots were taken. An error means the slots
	// could not be counted (the caller then counts on this replica alone).
	Take(ctx context.Context, ceilings []StreamCeiling) (full int, err error)
}

// StreamScope names what a stream ceiling counts, for the refusal's message.
type StreamScope string

// The scopes of a stream's ceilings.
const (
	StreamsOfPrincipal    StreamScope = "principal"
	StreamsOfUser         StreamScope = "user"
	StreamsOfOrganization StreamScope = "organization"
)

// StreamLimits are the ceilings on open run event streams (SVC_GATEWAY_MAX_STREAMS,
// SVC_GATEWAY_MAX_STREAMS_PER_USER, SVC_GATEWAY_MAX_STREAMS_PER_ORG).
type StreamLimits struct {
	PerPrincipal, PerUser, PerOrganization int
}

// StreamCeilings are the ceilings a stream of id is held under: its principal's (the
// rate-limit bucket's key, so the principal's cap means what it meant before the other two),
// its user's across every organization and API key, and its organization's across every
// principal, so that creating API keys or organizations does not multiply a user's or an
// organization's share. The user of an API key is the key's creator (identity resolves a key
// to its creator's id); a key whose creator was deleted has no user, and only its principal's
// and its organization's ceilings hold it. User ids are prefixed (usr_), never an organization
// id nor "org", so the user's set is never a principal's or an organization's.
func StreamCeilings(id internalauth.Identity, lim StreamLimits) []StreamCeiling {
	ceilings := []StreamCeiling{{Scope: StreamsOfPrincipal, Key: BucketKey(id), Max: lim.PerPrincipal}}
	if id.UserID != "" {
		ceilings = append(ceilings, StreamCeiling{Scope: StreamsOfUser, Key: "gw:user:" + id.UserID, Max: lim.PerUser})
	}
	return append(ceilings, StreamCeiling{Scope: StreamsOfOrganization, Key: OrganizationBucketKey(id), Max: lim.PerOrganization})
}
