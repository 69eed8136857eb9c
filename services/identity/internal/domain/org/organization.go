// Package org models an organization, the tenant boundary: its members with their roles and
// its pending invitations, and the rules for changing them (only owners and admins manage
// members; an organization never loses its last owner).
package org

import (
	"errors"
	"sort"
	"strings"
	"time"
	"unicode/utf8"

	"svc.dev/libs/wire"
	"svc.dev/services/identity/internal/domain/secret"
)

// The errors of organizations, members and invitations.
var (
	ErrNotFound           = errors.New("organization not found")
	ErrSlugTaken          = errors.New("an organization with this slug already exists")
	ErrInvalidName        = errors.New("name must be 1 to 100 characters of UTF-8 text")
	ErrInvalidSlug        = errors.New("slug must be 1 to 64 characters: lowercase letters and digits, separated by single hyphens")
	ErrInvalidRole        = errors.New(`role must be "owner", "admin" or "member"`)
	ErrNotMember          = errors.New("user is not a member of the organization")
	ErrForbidden          = errors.New("your role in the organization does not allow this")
	ErrOnlyOwner          = errors.New("the organization's only owner cannot leave or be removed")
	ErrMemberNotFound     = errors.New("member not found")
	ErrAlreadyMember      = errors.New("user is already a member of this organization")
	ErrAlreadyInvited     = errors.New("user is already invited to this organization")
	ErrInvitationNotFound = errors.New("invitation not found")
	ErrNotRecipient       = errors.New("you are not the recipient of the invitation")
	// ErrTooManyOrganizations is a new membership past the user's ceiling
	// (port.Ceilings.OrganizationsPerUser), which the repository enforces.
	ErrTooManyOrganizations = errors.New("you have reached the maximum number of organizations")
	// ErrTooManyInvitations is a new invitation while MaxOpenInvitations are open.
	ErrTooManyInvitations = errors.New("the organization has reached the maximum number of open invitations")
)

// MaxOpenInvitations bounds an organization's open invitations (better-auth's default
// invitationLimit): each is a row that every change of the organization loads, so an admin
// inviting in a loop would otherwise make them all slower, for good.
const MaxOpenInvitations = 100

// InvitationTTL is how long an invitation can be accepted (better-auth's default).
const InvitationTTL = 48 * time.Hour

// Role is a member's role.
type Role string

// The roles of a member.
const (
	Owner  Role = "owner"
	Admin  Role = "admin"
	Member Role = "member"
)

// ParseRole accepts the three roles.
func ParseRole(s string) (Role, error) {
	switch r := Role(s); r {
	case Owner, Admin, Member:
		return r, nil
	}
	return "", ErrInvalidRole
}

// Manages reports whether the role may manage members and API keys.
func (r Role) Manages() bool { return r == Owner || r == Admin }

// Person is a user as an organization sees them.
type Person struct {
	ID    string
	Email string
	Name  string
}

// Membership is one person's place in an organization.
type Membership struct {
	ID             string
	OrganizationID string
	User           Person
	Role           Role
	CreatedAt      time.Time
}

// InvitationStatus is where an invitation stands.
type InvitationStatus string

// The statuses an invitation goes through.
const (
	Pending  InvitationStatus = "pending"
	Accepted InvitationStatus = "accepted"
	Rejected InvitationStatus = "rejected"
	Canceled InvitationStatus = "canceled"
)

// Invitation asks the holder of Email to join with Role.
type Invitation struct {
	ID             string
	OrganizationID string
	Email          string
	Role           Role
	Status         InvitationStatus
	InviterID      string
	ExpiresAt      time.Time
	CreatedAt      time.Time
}

// Open reports whether the invitation can still be accepted at now.
func (i Invitation) Open(now time.Time) bool { return i.Status == Pending && now.Before(i.ExpiresAt) }

// Profile is an organization's own fields, what listings show.
type Profile struct {
	ID        string
	Name      string
	Slug      string
	CreatedAt time.Time
}

// Organization is the aggregate: profile, members and pending invitations.
type Organization struct {
	profile     Profile
	members     []Membership
	invitations []Invitation
}

// ValidSlug reports whether s is a slug: 1 to 64 lowercase letters and digits in groups
// joined by single hyphens.
func ValidSlug(s string) bool {
	if len(s) == 0 || len(s) > 64 || s[0] == '-' || s[len(s)-1] == '-' || strings.Contains(s, "--") {
		return false
	}
	return secret.Only(s, secret.LowerAlnum+"-")
}

// New creates an organization whose first member, owner, has the owner role.
func New(name, slug string, owner Person, now time.Time) (*Organization, error) {
	name = strings.TrimSpace(name)
	if name == "" || utf8.RuneCountInString(name) > 100 || !utf8.ValidString(name) || strings.ContainsRune(name, 0) {
		return nil, ErrInvalidName
	}
	if !ValidSlug(slug) {
		return nil, ErrInvalidSlug
	}
	if owner.ID == "" {
		return nil, errors.New("org: owner without id")
	}
	now = now.UTC().Truncate(time.Millisecond)
	id := wire.NewID(wire.Organization)
	return &Organization{
		profile: Profile{ID: id, Name: name, Slug: slug, CreatedAt: now},
		members: []Membership{{ID: wire.NewID(wire.Member), OrganizationID: id, User: owner, Role: Owner, CreatedAt: now}},
	}, nil
}

// PersonalSlug draws a slug of the form personal-<8 lowercase alphanumerics>.
func PersonalSlug() string { return "personal-" + secret.Random(8, secret.LowerAlnum) }

// NewPersonal creates the organization every user gets at sign-up, named name (or
// "Personal") with a personal-... slug.
func NewPersonal(name string, owner Person, now time.Time) (*Organization, error) {
	if strings.TrimSpace(name) == "" {
		name = "Personal"
	}
	return New(name, PersonalSlug(), owner, now)
}

// UnmarshalFromDatabase rebuilds a stored organization. Only adapters call it.
func UnmarshalFromDatabase(p Profile, members []Membership, invitations []Invitation) *Organization {
	p.CreatedAt = p.CreatedAt.UTC()
	o := &Organization{profile: p, members: append([]Membership(nil), members...), invitations: append([]Invitation(nil), invitations...)}
	sort.SliceStable(o.members, func(i, j int) bool { return o.members[i].ID < o.members[j].ID })
	return o
}

// Profile is the organization's own fields.
func (o *Organization) Profile() Profile { return o.profile }

// ID is the organization's id.
func (o *Organization) ID() string { return o.profile.ID }

// Members lists the members, oldest first.
func (o *Organization) Members() []Membership { return append([]Membership(nil), o.members...) }

// Invitations lists the invitations the aggregate holds (those pending when loaded, and any
// changed since).
func (o *Organization) Invitations() []Invitation { return append([]Invitation(nil), o.invitations...) }

// MemberOf returns userID's membership.
func (o *Organization) MemberOf(userID string) (Membership, bool) {
	for _, m := range o.members {
		if m.User.ID == userID {
			return m, true
		}
	}
	return Membership{}, false
}

// Authorize returns userID's membership, or ErrNotMember.
func (o *Organization) Authorize(userID string) (Membership, error) {
	m, ok := o.MemberOf(userID)
	if !ok {
		return Membership{}, ErrNotMember
	}
	return m, nil
}

// AuthorizeManager returns userID's membership when it is an owner or admin.
func (o *Organization) AuthorizeManager(userID string) (Membership, error) {
	m, err := o.Authorize(userID)
	if err != nil {
		return Membership{}, err
	}
	if !m.Role.Manages() {
		return Membership{}, ErrForbidden
	}
	return m, nil
}

func (o *Organization) owners() int {
	n := 0
	for _, m := range o.members {
		if m.Role == Owner {
			n++
		}
	}
	return n
}

// Invite invites email (already normalised) with role. Only owners and admins invite, and
// only owners invite owners. With resend, an open invitation for the same address is extended
// and returned instead of refused.
func (o *Organization) Invite(inviterID, email string, role Role, resend bool, now time.Time) (Invitation, error) {
	inviter, err := o.AuthorizeManager(inviterID)
	if err != nil {
		return Invitation{}, err
	}
	if role == Owner && inviter.Role != Owner {
		return Invitation{}, ErrForbidden
	}
	for _, m := range o.members {
		if strings.EqualFold(m.User.Email, email) {
			return Invitation{}, ErrAlreadyMember
		}
	}
	now = now.UTC().Truncate(time.Millisecond)
	for i, inv := range o.invitations {
		if inv.Open(now) && strings.EqualFold(inv.Email, email) {
			if !resend {
				return Invitation{}, ErrAlreadyInvited
			}
			o.invitations[i].ExpiresAt = now.Add(InvitationTTL)
			o.invitations[i].Role = role
			return o.invitations[i], nil
		}
	}
	open := 0
	for _, inv := range o.invitations {
		if inv.Open(now) {
			open++
		}
	}
	if open >= MaxOpenInvitations {
		return Invitation{}, ErrTooManyInvitations
	}
	inv := Invitation{ID: wire.NewID(wire.Invitation), OrganizationID: o.profile.ID, Email: email, Role: role,
		Status: Pending, InviterID: inviterID, ExpiresAt: now.Add(InvitationTTL), CreatedAt: now}
	o.invitations = append(o.invitations, inv)
	return inv, nil
}

// Accept lets who accept invitationID: it must be open and addressed to who's email.
func (o *Organization) Accept(invitationID string, who Person, now time.Time) (Invitation, Membership, error) {
	for i, inv := range o.invitations {
		if inv.ID != invitationID {
			continue
		}
		if !inv.Open(now) {
			break
		}
		if !strings.EqualFold(inv.Email, who.Email) {
			return Invitation{}, Membership{}, ErrNotRecipient
		}
		if _, ok := o.MemberOf(who.ID); ok {
			return Invitation{}, Membership{}, ErrAlreadyMember
		}
		o.invitations[i].Status = Accepted
		m := Membership{ID: wire.NewID(wire.Member), OrganizationID: o.profile.ID, User: who, Role: inv.Role,
			CreatedAt: now.UTC().Truncate(time.Millisecond)}
		o.members = append(o.members, m)
		return o.invitations[i], m, nil
	}
	return Invitation{}, Membership{}, ErrInvitationNotFound
}

// Remove lets actorID (owner or admin) remove the member named by id or email. Only owners
// remove owners, and never the last one.
func (o *Organization) Remove(actorID, memberIDOrEmail string) (Membership, error) {
	actor, err := o.AuthorizeManager(actorID)
	if err != nil {
		return Membership{}, err
	}
	idx := -1
	for i, m := range o.members {
		if m.ID == memberIDOrEmail || (strings.Contains(memberIDOrEmail, "@") && strings.EqualFold(m.User.Email, memberIDOrEmail)) {
			idx = i
			break
		}
	}
	if idx < 0 {
		return Membership{}, ErrMemberNotFound
	}
	target := o.members[idx]
	if target.Role == Owner {
		if actor.Role != Owner {
			return Membership{}, ErrForbidden
		}
		if o.owners() <= 1 {
			return Membership{}, ErrOnlyOwner
		}
	}
	o.members = append(o.members[:idx], o.members[idx+1:]...)
	return target, nil
}

// Leave removes userID's own membership; the only owner cannot leave.
func (o *Organization) Leave(userID string) (Membership, error) {
	m, err := o.Authorize(userID)
	if err != nil {
		return Membership{}, err
	}
	if m.Role == Owner && o.owners() <= 1 {
		return Membership{}, ErrOnlyOwner
	}
	for i := range o.members {
		if o.members[i].ID == m.ID {
			o.members = append(o.members[:i], o.members[i+1:]...)
			break
		}
	}
	return m, nil
}
