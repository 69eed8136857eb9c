package org_test

import (
	"fmt"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"svc.dev/services/identity/internal/domain/org"
)

var (
	ann = org.Person{ID: "usr_ann", Email: "ann@x.io", Name: "Ann"}
	bob = org.Person{ID: "usr_bob", Email: "bob@x.io", Name: "Bob"}
	cat = org.Person{ID: "usr_cat", Email: "cat@x.io", Name: "Cat"}
)

// withMembers builds an organization owned by ann with bob and cat in the given roles.
func withMembers(t *testing.T, bobRole, catRole org.Role) *org.Organization {
	t.Helper()
	o, err := org.New("Acme", "acme", ann, time.Now())
	require.NoError(t, err)
	for _, p := range []struct {
		who  org.Person
		role org.Role
	}{{bob, bobRole}, {cat, catRole}} {
		if p.role == "" {
			continue
		}
		inv, err := o.Invite(ann.ID, p.who.Email, p.role, false, time.Now())
		require.NoError(t, err)
		_, _, err = o.Accept(inv.ID, p.who, time.Now())
		require.NoError(t, err)
	}
	return o
}

func TestNew(t *testing.T) {
	t.Parallel()
	o, err := org.New(" Acme ", "acme-2", ann, time.Now())
	require.NoError(t, err)
	require.Equal(t, "Acme", o.Profile().Name)
	require.Regexp(t, `^org_`, o.ID())
	m, ok := o.MemberOf(ann.ID)
	require.True(t, ok)
	require.Equal(t, org.Owner, m.Role)
	require.Regexp(t, `^mem_`, m.ID)

	for _, slug := range []string{"", "-a", "a-", "a--b", "A", "a_b", "a b", "ü"} {
		_, err := org.New("x", slug, ann, time.Now())
		require.ErrorIs(t, err, org.ErrInvalidSlug, slug)
	}
	_, err = org.New("  ", "x", ann, time.Now())
	require.ErrorIs(t, err, org.ErrInvalidName)
	for _, bad := range []string{"Acme\xff", "a\x00b"} {
		_, err = org.New(bad, "x", ann, time.Now())
		require.ErrorIs(t, err, org.ErrInvalidName, "%q", bad)
	}

	p, err := org.NewPersonal("", ann, time.Now())
	require.NoError(t, err)
	require.Regexp(t, `^personal-[a-z0-9]{8}$`, p.Profile().Slug)
	require.Equal(t, "Personal", p.Profile().Name)
}

func TestInvite(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		name    string
		bobRole org.Role
		inviter string
		role    org.Role
		email   string
		want    error
	}{
		{"OwnerInvitesMember", org.Member, ann.ID, org.Member, "dan@x.io", nil},
		{"OwnerInvitesOwner", org.Member, ann.ID, org.Owner, "dan@x.io", nil},
		{"AdminInvitesAdmin", org.Admin, bob.ID, org.Admin, "dan@x.io", nil},
		{"AdminCannotInviteOwner", org.Admin, bob.ID, org.Owner, "dan@x.io", org.ErrForbidden},
		{"MemberCannotInvite", org.Member, bob.ID, org.Member, "dan@x.io", org.ErrForbidden},
		{"StrangerCannotInvite", org.Member, "usr_x", org.Member, "dan@x.io", org.ErrNotMember},
		{"AlreadyMember", org.Member, ann.ID, org.Member, "BOB@x.io", org.ErrAlreadyMember},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			o := withMembers(t, tc.bobRole, "")
			inv, err := o.Invite(tc.inviter, tc.email, tc.role, false, time.Now())
			require.ErrorIs(t, err, tc.want)
			if tc.want == nil {
				require.Equal(t, org.Pending, inv.Status)
				require.Regexp(t, `^inv_`, inv.ID)
			}
		})
	}

	t.Run("OpenInvitationsAreBounded", func(t *testing.T) {
		t.Parallel()
		o := withMembers(t, "", "")
		now := time.Now()
		for i := range org.MaxOpenInvitations {
			_, err := o.Invite(ann.ID, fmt.Sprintf("guest%d@x.io", i), org.Member, false, now)
			require.NoError(t, err)
		}
		_, err := o.Invite(ann.ID, "one-more@x.io", org.Member, false, now)
		require.ErrorIs(t, err, org.ErrTooManyInvitations)
		_, err = o.Invite(ann.ID, "guest7@x.io", org.Admin, true, now)
		require.NoError(t, err, "resending an open invitation opens none")
		// Once they expire, they count no more.
		_, err = o.Invite(ann.ID, "one-more@x.io", org.Member, false, now.Add(org.InvitationTTL+time.Minute))
		require.NoError(t, err)
	})

	t.Run("TwiceIsRefusedUnlessResent", func(t *testing.T) {
		t.Parallel()
		o := withMembers(t, "", "")
		now := time.Now()
		first, err := o.Invite(ann.ID, "dan@x.io", org.Member, false, now)
		require.NoError(t, err)
		_, err = o.Invite(ann.ID, "dan@x.io", org.Member, false, now)
		require.ErrorIs(t, err, org.ErrAlreadyInvited)
		again, err := o.Invite(ann.ID, "dan@x.io", org.Admin, true, now.Add(time.Hour))
		require.NoError(t, err)
		require.Equal(t, first.ID, again.ID)
		require.Equal(t, org.Admin, again.Role)
		require.True(t, again.ExpiresAt.After(first.ExpiresAt))
	})
}

func TestAccept(t *testing.T) {
	t.Parallel()
	now := time.Now()
	o := withMembers(t, "", "")
	inv, err := o.Invite(ann.ID, bob.Email, org.Admin, false, now)
	require.NoError(t, err)

	_, _, err = o.Accept(inv.ID, cat, now)
	require.ErrorIs(t, err, org.ErrNotRecipient)
	_, _, err = o.Accept("inv_nope", bob, now)
	require.ErrorIs(t, err, org.ErrInvitationNotFound)
	_, _, err = o.Accept(inv.ID, bob, now.Add(org.InvitationTTL))
	require.ErrorIs(t, err, org.ErrInvitationNotFound, "expired")

	got, m, err := o.Accept(inv.ID, bob, now)
	require.NoError(t, err)
	require.Equal(t, org.Accepted, got.Status)
	require.Equal(t, org.Admin, m.Role)
	_, _, err = o.Accept(inv.ID, bob, now)
	require.ErrorIs(t, err, org.ErrInvitationNotFound, "used up")
}

func TestRemove(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		name             string
		bobRole, catRole org.Role
		actor            string
		target           string
		want             error
	}{
		{"OwnerRemovesMember", org.Member, "", ann.ID, "bob@x.io", nil},
		{"AdminRemovesMember", org.Admin, org.Member, bob.ID, "cat@x.io", nil},
		{"MemberCannotRemove", org.Member, org.Member, bob.ID, "cat@x.io", org.ErrForbidden},
		{"AdminCannotRemoveOwner", org.Admin, "", bob.ID, "ann@x.io", org.ErrForbidden},
		{"LastOwnerStays", org.Member, "", ann.ID, "ann@x.io", org.ErrOnlyOwner},
		{"OneOfTwoOwners", org.Owner, "", ann.ID, "bob@x.io", nil},
		{"Unknown", org.Member, "", ann.ID, "nobody@x.io", org.ErrMemberNotFound},
		{"UnknownID", org.Member, "", ann.ID, "mem_nope", org.ErrMemberNotFound},
		{"Stranger", org.Member, "", "usr_x", "bob@x.io", org.ErrNotMember},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			o := withMembers(t, tc.bobRole, tc.catRole)
			before := len(o.Members())
			m, err := o.Remove(tc.actor, tc.target)
			require.ErrorIs(t, err, tc.want)
			if tc.want == nil {
				require.Equal(t, tc.target, m.User.Email)
				require.Len(t, o.Members(), before-1)
			} else {
				require.Len(t, o.Members(), before)
			}
		})
	}

	t.Run("ByID", func(t *testing.T) {
		t.Parallel()
		o := withMembers(t, org.Member, "")
		m, _ := o.MemberOf(bob.ID)
		got, err := o.Remove(ann.ID, m.ID)
		require.NoError(t, err)
		require.Equal(t, bob.ID, got.User.ID)
	})
}

func TestLeave(t *testing.T) {
	t.Parallel()
	o := withMembers(t, org.Member, "")
	_, err := o.Leave(ann.ID)
	require.ErrorIs(t, err, org.ErrOnlyOwner)
	_, err = o.Leave("usr_x")
	require.ErrorIs(t, err, org.ErrNotMember)
	m, err := o.Leave(bob.ID)
	require.NoError(t, err)
	require.Equal(t, bob.ID, m.User.ID)
	_, ok := o.MemberOf(bob.ID)
	require.False(t, ok)
}
