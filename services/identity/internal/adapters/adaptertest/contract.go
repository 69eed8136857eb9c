// Package adaptertest is the contract every implementation of identity's stores honours. The
// in-memory adapter (which app tests run on) and the Postgres adapter run the same suite, so
// a fake never drifts from the real thing.
package adaptertest

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"svc.dev/services/identity/internal/app/port"
	"svc.dev/services/identity/internal/domain/apikey"
	"svc.dev/services/identity/internal/domain/org"
	"svc.dev/services/identity/internal/domain/secret"
	"svc.dev/services/identity/internal/domain/session"
	"svc.dev/services/identity/internal/domain/user"
)

// NewFunc returns fresh, empty stores for one test, keeping c.
type NewFunc func(t *testing.T, c port.Ceilings) port.Repositories

type testBundle struct {
	repos port.Repositories
	ctx   context.Context
	now   time.Time
}

// account is a registered user with its personal organization and first session.
type account struct {
	user  *user.User
	org   *org.Organization
	sess  *session.Session
	token session.Token
}

func (b *testBundle) register(t *testing.T, email string) account {
	t.Helper()
	u, err := user.New(email, "Name of "+email, "hash:"+email, b.now)
	require.NoError(t, err)
	o, err := org.NewPersonal("", org.Person{ID: u.ID(), Email: u.Email(), Name: u.Name()}, b.now)
	require.NoError(t, err)
	s, tok := session.New(u.ID(), o.ID(), "203.0.113.9", "test", b.now)
	require.NoError(t, b.repos.Registrar.Register(b.ctx, port.Registration{User: u, Organization: o, Session: s}))
	return account{user: u, org: o, sess: s, token: tok}
}

func person(u *user.User) org.Person { return org.Person{ID: u.ID(), Email: u.Email(), Name: u.Name()} }

// Run runs the contract against the stores newRepos makes.
func Run(t *testing.T, newRepos NewFunc) {
	setupCeilings := func(t *testing.T, c port.Ceilings) *testBundle {
		t.Helper()
		return &testBundle{repos: newRepos(t, c), ctx: context.Background(), now: time.Now().UTC().Truncate(time.Millisecond)}
	}
	setup := func(t *testing.T) *testBundle {
		t.Helper()
		return setupCeilings(t, port.DefaultCeilings())
	}

	t.Run("Registrar", func(t *testing.T) {
		t.Parallel()
		b := setup(t)
		anyUsers, err := b.repos.Registrar.AnyUsers(b.ctx)
		require.NoError(t, err)
		require.False(t, anyUsers)

		a := b.register(t, "ann@x.io")
		anyUsers, err = b.repos.Registrar.AnyUsers(b.ctx)
		require.NoError(t, err)
		require.True(t, anyUsers)

		got, err := b.repos.Users.Get(b.ctx, a.user.ID())
		require.NoError(t, err)
		require.Equal(t, a.user.Email(), got.Email())
		require.Equal(t, "hash:ann@x.io", got.PasswordHash())
		require.True(t, a.user.CreatedAt().Equal(got.CreatedAt()))
		o, err := b.repos.Organizations.Get(b.ctx, a.org.ID())
		require.NoError(t, err)
		m, ok := o.MemberOf(a.user.ID())
		require.True(t, ok)
		require.Equal(t, org.Owner, m.Role)

		// Nothing of a failed registration is left behind.
		u2, err := user.New("ANN@x.io", "", "hash", b.now)
		require.NoError(t, err)
		o2, err := org.NewPersonal("", person(u2), b.now)
		require.NoError(t, err)
		err = b.repos.Registrar.Register(b.ctx, port.Registration{User: u2, Organization: o2})
		require.ErrorIs(t, err, user.ErrEmailTaken)
		_, err = b.repos.Organizations.Get(b.ctx, o2.ID())
		require.ErrorIs(t, err, org.ErrNotFound)

		u3, err := user.New("cat@x.io", "", "hash", b.now)
		require.NoError(t, err)
		o3, err := org.New("Dup", a.org.Profile().Slug, person(u3), b.now)
		require.NoError(t, err)
		require.ErrorIs(t, b.repos.Registrar.Register(b.ctx, port.Registration{User: u3, Organization: o3}), org.ErrSlugTaken)
		_, err = b.repos.Users.ByEmail(b.ctx, "cat@x.io")
		require.ErrorIs(t, err, user.ErrNotFound)

		o4, err := org.NewPersonal("", person(u3), b.now)
		require.NoError(t, err)
		k, _, err := apikey.New("boot", o4.ID(), u3.ID(), 0, b.now)
		require.NoError(t, err)
		err = b.repos.Registrar.Register(b.ctx, port.Registration{User: u3, Organization: o4, APIKey: k, OnlyIfNoUsers: true})
		require.ErrorIs(t, err, port.ErrUsersExist)
		_, err = b.repos.Keys.Get(b.ctx, k.ID())
		require.ErrorIs(t, err, apikey.ErrNotFound)
	})

	t.Run("Users", func(t *testing.T) {
		t.Parallel()
		b := setup(t)
		a := b.register(t, "ann@x.io")
		_, err := b.repos.Users.Get(b.ctx, "usr_nope")
		require.ErrorIs(t, err, user.ErrNotFound)
		got, err := b.repos.Users.ByEmail(b.ctx, "ANN@X.IO")
		require.NoError(t, err)
		require.Equal(t, a.user.ID(), got.ID())
		_, err = b.repos.Users.ByEmail(b.ctx, "nobody@x.io")
		require.ErrorIs(t, err, user.ErrNotFound)

		// A failing update changes nothing.
		boom := errors.New("boom")
		err = b.repos.Users.Update(b.ctx, a.user.ID(), func(_ context.Context, u *user.User) error {
			u.ChangePassword("other", true, b.now)
			return boom
		})
		require.ErrorIs(t, err, boom)
		got, err = b.repos.Users.Get(b.ctx, a.user.ID())
		require.NoError(t, err)
		require.Equal(t, "hash:ann@x.io", got.PasswordHash())
		_, err = b.repos.Sessions.Authenticate(b.ctx, a.token.Hash())
		require.NoError(t, err)

		// A password change keeps sessions unless asked; a revoking one deletes them all.
		require.NoError(t, b.repos.Users.Update(b.ctx, a.user.ID(), func(_ context.Context, u *user.User) error {
			u.ChangePassword("second", false, b.now.Add(time.Second))
			return nil
		}))
		_, err = b.repos.Sessions.Authenticate(b.ctx, a.token.Hash())
		require.NoError(t, err)
		require.NoError(t, b.repos.Users.Update(b.ctx, a.user.ID(), func(_ context.Context, u *user.User) error {
			u.ChangePassword("third", true, b.now.Add(2*time.Second))
			return nil
		}))
		got, err = b.repos.Users.Get(b.ctx, a.user.ID())
		require.NoError(t, err)
		require.Equal(t, "third", got.PasswordHash())
		require.True(t, b.now.Add(2*time.Second).Equal(got.UpdatedAt()))
		_, err = b.repos.Sessions.Authenticate(b.ctx, a.token.Hash())
		require.ErrorIs(t, err, session.ErrNotFound)
		require.ErrorIs(t, b.repos.Users.Update(b.ctx, "usr_nope", func(context.Context, *user.User) error { return nil }), user.ErrNotFound)
	})

	t.Run("Sessions", func(t *testing.T) {
		t.Parallel()
		b := setup(t)
		a := b.register(t, "ann@x.io")
		rec, err := b.repos.Sessions.Authenticate(b.ctx, a.token.Hash())
		require.NoError(t, err)
		require.Equal(t, a.sess.ID(), rec.Session.ID())
		require.Equal(t, a.user.ID(), rec.User.ID())
		require.Equal(t, "hash:ann@x.io", rec.User.PasswordHash())
		require.Equal(t, org.Owner, rec.Role)
		require.Equal(t, a.org.ID(), rec.Session.ActiveOrganizationID())
		require.True(t, a.sess.ExpiresAt().Equal(rec.Session.ExpiresAt()))
		require.Equal(t, "203.0.113.9", rec.Session.IPAddress())
		_, err = b.repos.Sessions.Authenticate(b.ctx, session.NewToken().Hash())
		require.ErrorIs(t, err, session.ErrNotFound)

		// Clearing the active organization is remembered; the role goes with it.
		require.NoError(t, b.repos.Sessions.Update(b.ctx, a.sess.ID(), func(_ context.Context, s *session.Session) error {
			s.ClearActiveOrganization(b.now)
			return nil
		}))
		rec, err = b.repos.Sessions.Authenticate(b.ctx, a.token.Hash())
		require.NoError(t, err)
		require.Empty(t, rec.Session.ActiveOrganizationID())
		require.True(t, rec.Session.ActiveCleared())
		require.Empty(t, rec.Role)
		require.ErrorIs(t, b.repos.Sessions.Update(b.ctx, "ses_nope", func(context.Context, *session.Session) error { return nil }), session.ErrNotFound)

		// Extend only ever moves the expiry forward.
		later := a.sess.ExpiresAt().Add(time.Hour)
		require.NoError(t, b.repos.Sessions.Extend(b.ctx, a.sess.ID(), later))
		require.NoError(t, b.repos.Sessions.Extend(b.ctx, a.sess.ID(), later.Add(-2*time.Hour)))
		rec, err = b.repos.Sessions.Authenticate(b.ctx, a.token.Hash())
		require.NoError(t, err)
		require.True(t, later.Equal(rec.Session.ExpiresAt()), "%s != %s", later, rec.Session.ExpiresAt())
		require.NoError(t, b.repos.Sessions.Extend(b.ctx, "ses_nope", later))

		// A second session of the same user, then sign-out of the first.
		s2, tok2 := session.New(a.user.ID(), "", "", "", b.now)
		require.NoError(t, b.repos.Sessions.Add(b.ctx, s2))
		rec, err = b.repos.Sessions.Authenticate(b.ctx, tok2.Hash())
		require.NoError(t, err)
		require.False(t, rec.Session.ActiveCleared())
		require.NoError(t, b.repos.Sessions.Delete(b.ctx, a.sess.ID()))
		_, err = b.repos.Sessions.Authenticate(b.ctx, a.token.Hash())
		require.ErrorIs(t, err, session.ErrNotFound)
		require.NoError(t, b.repos.Sessions.Delete(b.ctx, a.sess.ID()), "deleting twice is fine")
		_, err = b.repos.Sessions.Authenticate(b.ctx, tok2.Hash())
		require.NoError(t, err)
	})

	// Whatever a client can get past the domain is storable: the longest names the rules
	// allow, in characters of several bytes, and a session whose User-Agent and address
	// were not UTF-8 or were cut in the middle of a character (Postgres refuses invalid
	// UTF-8 in text).
	t.Run("ClientStrings", func(t *testing.T) {
		t.Parallel()
		b := setup(t)
		u, err := user.New(strings.Repeat("é", 60)+"@x.io", strings.Repeat("€", 100), "hash", b.now)
		require.NoError(t, err)
		o, err := org.New(strings.Repeat("😀", 100), "emoji", person(u), b.now)
		require.NoError(t, err)
		s, tok := session.New(u.ID(), o.ID(), "198.51.100.7\xff", "Mozilla\xff", b.now)
		require.NoError(t, b.repos.Registrar.Register(b.ctx, port.Registration{User: u, Organization: o, Session: s}))
		rec, err := b.repos.Sessions.Authenticate(b.ctx, tok.Hash())
		require.NoError(t, err)
		require.Equal(t, "Mozilla\uFFFD", rec.Session.UserAgent())
		require.Equal(t, strings.Repeat("€", 100), rec.User.Name())

		for _, ua := range []string{strings.Repeat("a", 511) + "é", strings.Repeat("é", 300), "a\x80\x80b\x00"} {
			s2, tok2 := session.New(u.ID(), "", "", ua, b.now)
			require.NoError(t, b.repos.Sessions.Add(b.ctx, s2), "%q", ua)
			rec, err := b.repos.Sessions.Authenticate(b.ctx, tok2.Hash())
			require.NoError(t, err)
			require.Equal(t, s2.UserAgent(), rec.Session.UserAgent())
		}
		k, _, err := apikey.New(strings.Repeat("ü", 64), o.ID(), u.ID(), 0, b.now)
		require.NoError(t, err)
		require.NoError(t, b.repos.Keys.Add(b.ctx, k))
	})

	t.Run("Organizations", func(t *testing.T) {
		t.Parallel()
		b := setup(t)
		ann, bob := b.register(t, "ann@x.io"), b.register(t, "bob@x.io")
		team, err := org.New("Team", "team", person(ann.user), b.now)
		require.NoError(t, err)
		require.NoError(t, b.repos.Organizations.Add(b.ctx, team))
		dup, err := org.New("Team 2", "team", person(bob.user), b.now)
		require.NoError(t, err)
		require.ErrorIs(t, b.repos.Organizations.Add(b.ctx, dup), org.ErrSlugTaken)

		got, err := b.repos.Organizations.BySlug(b.ctx, "team")
		require.NoError(t, err)
		require.Equal(t, team.ID(), got.ID())
		require.Equal(t, team.Profile().Name, got.Profile().Name)
		require.True(t, team.Profile().CreatedAt.Equal(got.Profile().CreatedAt))
		_, err = b.repos.Organizations.BySlug(b.ctx, "nope")
		require.ErrorIs(t, err, org.ErrNotFound)
		_, err = b.repos.Organizations.Get(b.ctx, "org_nope")
		require.ErrorIs(t, err, org.ErrNotFound)

		ps, err := b.repos.Organizations.ListForUser(b.ctx, ann.user.ID())
		require.NoError(t, err)
		require.Equal(t, []string{ann.org.ID(), team.ID()}, []string{ps[0].ID, ps[1].ID}, "in the order joined")
		ps, err = b.repos.Organizations.ListForUser(b.ctx, "usr_nope")
		require.NoError(t, err)
		require.Empty(t, ps)

		_, ok, err := b.repos.Organizations.OnlyMembership(b.ctx, ann.user.ID())
		require.NoError(t, err)
		require.False(t, ok, "two memberships")
		m, ok, err := b.repos.Organizations.OnlyMembership(b.ctx, bob.user.ID())
		require.NoError(t, err)
		require.True(t, ok)
		require.Equal(t, bob.org.ID(), m.OrganizationID)
		require.Equal(t, org.Owner, m.Role)
		_, ok, err = b.repos.Organizations.OnlyMembership(b.ctx, "usr_nope")
		require.NoError(t, err)
		require.False(t, ok)

		// Invite and accept in two updates; the membership and the invitation's state persist.
		var inv org.Invitation
		require.NoError(t, b.repos.Organizations.Update(b.ctx, team.ID(), func(_ context.Context, o *org.Organization) error {
			var err error
			inv, err = o.Invite(ann.user.ID(), "bob@x.io", org.Admin, false, b.now)
			return err
		}))
		orgID, err := b.repos.Organizations.InvitationOrganization(b.ctx, inv.ID)
		require.NoError(t, err)
		require.Equal(t, team.ID(), orgID)
		_, err = b.repos.Organizations.InvitationOrganization(b.ctx, "inv_nope")
		require.ErrorIs(t, err, org.ErrInvitationNotFound)
		got, err = b.repos.Organizations.Get(b.ctx, team.ID())
		require.NoError(t, err)
		require.Len(t, got.Invitations(), 1)
		require.Equal(t, "bob@x.io", got.Invitations()[0].Email)
		require.True(t, inv.ExpiresAt.Equal(got.Invitations()[0].ExpiresAt))

		require.NoError(t, b.repos.Organizations.Update(b.ctx, team.ID(), func(_ context.Context, o *org.Organization) error {
			_, _, err := o.Accept(inv.ID, person(bob.user), b.now)
			return err
		}))
		got, err = b.repos.Organizations.Get(b.ctx, team.ID())
		require.NoError(t, err)
		require.Empty(t, got.Invitations(), "only pending invitations are loaded")
		m, ok = got.MemberOf(bob.user.ID())
		require.True(t, ok)
		require.Equal(t, org.Admin, m.Role)
		require.Equal(t, "bob@x.io", m.User.Email)
		require.Len(t, got.Members(), 2)

		// Session lookups see the new membership's role.
		require.NoError(t, b.repos.Sessions.Update(b.ctx, bob.sess.ID(), func(_ context.Context, s *session.Session) error {
			s.SetActiveOrganization(team.ID(), b.now)
			return nil
		}))
		rec, err := b.repos.Sessions.Authenticate(b.ctx, bob.token.Hash())
		require.NoError(t, err)
		require.Equal(t, org.Admin, rec.Role)

		// A failing update changes nothing; a removal deletes the membership.
		boom := errors.New("boom")
		err = b.repos.Organizations.Update(b.ctx, team.ID(), func(_ context.Context, o *org.Organization) error {
			_, err := o.Remove(ann.user.ID(), "bob@x.io")
			require.NoError(t, err)
			return boom
		})
		require.ErrorIs(t, err, boom)
		got, err = b.repos.Organizations.Get(b.ctx, team.ID())
		require.NoError(t, err)
		require.Len(t, got.Members(), 2)
		require.NoError(t, b.repos.Organizations.Update(b.ctx, team.ID(), func(_ context.Context, o *org.Organization) error {
			_, err := o.Leave(bob.user.ID())
			return err
		}))
		got, err = b.repos.Organizations.Get(b.ctx, team.ID())
		require.NoError(t, err)
		require.Len(t, got.Members(), 1)
		rec, err = b.repos.Sessions.Authenticate(b.ctx, bob.token.Hash())
		require.NoError(t, err)
		require.Equal(t, team.ID(), rec.Session.ActiveOrganizationID())
		require.Empty(t, rec.Role, "no longer a member of the active organization")
		require.ErrorIs(t, b.repos.Organizations.Update(b.ctx, "org_nope", func(context.Context, *org.Organization) error { return nil }), org.ErrNotFound)
	})

	t.Run("Keys", func(t *testing.T) {
		t.Parallel()
		b := setup(t)
		a := b.register(t, "ann@x.io")
		k1, raw1, err := apikey.New("one", a.org.ID(), a.user.ID(), 0, b.now)
		require.NoError(t, err)
		k2, _, err := apikey.New("", a.org.ID(), "", time.Hour, b.now.Add(time.Millisecond))
		require.NoError(t, err)
		require.NoError(t, b.repos.Keys.Add(b.ctx, k1))
		require.NoError(t, b.repos.Keys.Add(b.ctx, k2))

		got, err := b.repos.Keys.Get(b.ctx, k2.ID())
		require.NoError(t, err)
		require.Empty(t, got.Name())
		require.Empty(t, got.CreatedBy())
		require.True(t, k2.ExpiresAt().Equal(got.ExpiresAt()))
		require.True(t, got.LastRequest().IsZero())
		got, err = b.repos.Keys.ByHash(b.ctx, apikey.Hash(raw1))
		require.NoError(t, err)
		require.Equal(t, k1.ID(), got.ID())
		require.Equal(t, raw1[:6], got.Start())
		_, err = b.repos.Keys.ByHash(b.ctx, apikey.Hash("svc_nope"))
		require.ErrorIs(t, err, apikey.ErrNotFound)
		_, err = b.repos.Keys.Get(b.ctx, "key_nope")
		require.ErrorIs(t, err, apikey.ErrNotFound)

		rec, err := b.repos.Keys.Authenticate(b.ctx, apikey.Hash(raw1))
		require.NoError(t, err)
		require.Equal(t, k1.ID(), rec.Key.ID())
		require.Equal(t, person(a.user), rec.Creator)
		_, err = b.repos.Keys.Authenticate(b.ctx, secret.SHA256URL("x"))
		require.ErrorIs(t, err, apikey.ErrNotFound)

		ks, err := b.repos.Keys.ListByOrganization(b.ctx, a.org.ID())
		require.NoError(t, err)
		require.Len(t, ks, 2)
		require.Equal(t, k1.ID(), ks[0].ID(), "oldest first")
		ks, err = b.repos.Keys.ListByOrganization(b.ctx, "org_nope")
		require.NoError(t, err)
		require.Empty(t, ks)

		t1 := b.now.Add(time.Second)
		require.NoError(t, b.repos.Keys.Touch(b.ctx, map[string]time.Time{k1.ID(): t1, "key_gone": t1}))
		require.NoError(t, b.repos.Keys.Touch(b.ctx, map[string]time.Time{k1.ID(): b.now}), "older use: ignored")
		require.NoError(t, b.repos.Keys.Touch(b.ctx, nil))
		got, err = b.repos.Keys.Get(b.ctx, k1.ID())
		require.NoError(t, err)
		require.True(t, t1.Equal(got.LastRequest()), "%s != %s", t1, got.LastRequest())

		require.NoError(t, b.repos.Keys.Delete(b.ctx, k1.ID()))
		require.ErrorIs(t, b.repos.Keys.Delete(b.ctx, k1.ID()), apikey.ErrNotFound)
		_, err = b.repos.Keys.Authenticate(b.ctx, apikey.Hash(raw1))
		require.ErrorIs(t, err, apikey.ErrNotFound, "revoked at once")
	})

	// Ceilings: memberships per user (create and accept), keys per organization and per
	// creator. What is refused leaves nothing behind, and leaving or deleting makes room.
	t.Run("Ceilings", func(t *testing.T) {
		t.Parallel()
		b := setupCeilings(t, port.Ceilings{OrganizationsPerUser: 2, KeysPerOrganization: 2, KeysPerUser: 3})
		ann, bob := b.register(t, "ann@x.io"), b.register(t, "bob@x.io")
		invite := func(o *org.Organization, by *user.User, email string, role org.Role) org.Invitation {
			t.Helper()
			var inv org.Invitation
			require.NoError(t, b.repos.Organizations.Update(b.ctx, o.ID(), func(_ context.Context, o *org.Organization) error {
				var err error
				inv, err = o.Invite(by.ID(), email, role, false, b.now)
				return err
			}))
			return inv
		}
		accept := func(o *org.Organization, inv org.Invitation, who *user.User) error {
			return b.repos.Organizations.Update(b.ctx, o.ID(), func(_ context.Context, o *org.Organization) error {
				_, _, err := o.Accept(inv.ID, person(who), b.now)
				return err
			})
		}

		// Sign-up's personal organization counts: Ann may create one more.
		team, err := org.New("Team", "team", person(ann.user), b.now)
		require.NoError(t, err)
		require.NoError(t, b.repos.Organizations.Add(b.ctx, team))
		third, err := org.New("Third", "third", person(ann.user), b.now)
		require.NoError(t, err)
		require.ErrorIs(t, b.repos.Organizations.Add(b.ctx, third), org.ErrTooManyOrganizations)
		_, err = b.repos.Organizations.BySlug(b.ctx, "third")
		require.ErrorIs(t, err, org.ErrNotFound, "nothing stored")

		// Accepting counts too, and a refused accept changes nothing.
		toBob := invite(bob.org, bob.user, "ann@x.io", org.Member)
		require.ErrorIs(t, accept(bob.org, toBob, ann.user), org.ErrTooManyOrganizations)
		got, err := b.repos.Organizations.Get(b.ctx, bob.org.ID())
		require.NoError(t, err)
		require.Len(t, got.Members(), 1)
		require.Len(t, got.Invitations(), 1, "still pending")

		// Ann hands her team to Bob and leaves it: now she has room.
		require.NoError(t, accept(team, invite(team, ann.user, "bob@x.io", org.Owner), bob.user))
		require.NoError(t, b.repos.Organizations.Update(b.ctx, team.ID(), func(_ context.Context, o *org.Organization) error {
			_, err := o.Leave(ann.user.ID())
			return err
		}))
		require.NoError(t, accept(bob.org, toBob, ann.user))

		newKey := func(orgID, by string) *apikey.APIKey {
			t.Helper()
			k, _, err := apikey.New("k", orgID, by, 0, b.now)
			require.NoError(t, err)
			return k
		}
		k1 := newKey(ann.org.ID(), ann.user.ID())
		require.NoError(t, b.repos.Keys.Add(b.ctx, k1))
		require.NoError(t, b.repos.Keys.Add(b.ctx, newKey(ann.org.ID(), ann.user.ID())))
		require.ErrorIs(t, b.repos.Keys.Add(b.ctx, newKey(ann.org.ID(), bob.user.ID())), apikey.ErrTooManyKeys)
		require.ErrorIs(t, b.repos.Keys.Add(b.ctx, newKey(ann.org.ID(), "")), apikey.ErrTooManyKeys, "a key without creator too")
		require.NoError(t, b.repos.Keys.Add(b.ctx, newKey(bob.org.ID(), ann.user.ID())), "Ann's third key, in Bob's organization")
		require.ErrorIs(t, b.repos.Keys.Add(b.ctx, newKey(bob.org.ID(), ann.user.ID())), apikey.ErrTooManyKeysOfUser)
		ks, err := b.repos.Keys.ListByOrganization(b.ctx, bob.org.ID())
		require.NoError(t, err)
		require.Len(t, ks, 1, "nothing stored")
		require.NoError(t, b.repos.Keys.Delete(b.ctx, k1.ID()))
		require.NoError(t, b.repos.Keys.Add(b.ctx, newKey(ann.org.ID(), ann.user.ID())), "a deleted key makes room")
	})

	// Concurrent creates under one ceiling: exactly as many pass as it allows (the count and
	// the insert are one atomic step), and the others get the ceiling's error.
	t.Run("CeilingsUnderConcurrency", func(t *testing.T) {
		t.Parallel()
		const n = 12
		race := func(add func(i int) error) (passed int, errs []error) {
			out := make([]error, n)
			var wg sync.WaitGroup
			for i := range n {
				wg.Go(func() { out[i] = add(i) })
			}
			wg.Wait()
			for _, err := range out {
				if err == nil {
					passed++
				} else {
					errs = append(errs, err)
				}
			}
			return passed, errs
		}
		requireAll := func(t *testing.T, errs []error, want error) {
			t.Helper()
			for _, err := range errs {
				require.ErrorIs(t, err, want)
			}
		}

		b := setupCeilings(t, port.Ceilings{OrganizationsPerUser: 3, KeysPerOrganization: 4, KeysPerUser: 5})
		ann := b.register(t, "ann@x.io")
		passed, errs := race(func(i int) error {
			o, err := org.New("Race", fmt.Sprintf("race-%d", i), person(ann.user), b.now)
			if err != nil {
				return err
			}
			return b.repos.Organizations.Add(b.ctx, o)
		})
		require.Equal(t, 2, passed, "the personal organization and two more: %v", errs)
		requireAll(t, errs, org.ErrTooManyOrganizations)
		ps, err := b.repos.Organizations.ListForUser(b.ctx, ann.user.ID())
		require.NoError(t, err)
		require.Len(t, ps, 3)

		passed, errs = race(func(int) error {
			k, _, err := apikey.New("k", ann.org.ID(), ann.user.ID(), 0, b.now)
			if err != nil {
				return err
			}
			return b.repos.Keys.Add(b.ctx, k)
		})
		require.Equal(t, 4, passed, "%v", errs)
		requireAll(t, errs, apikey.ErrTooManyKeys)

		// Ann's fifth and last key, raced across her two other organizations.
		passed, errs = race(func(i int) error {
			k, _, err := apikey.New("k", ps[1+i%2].ID, ann.user.ID(), 0, b.now)
			if err != nil {
				return err
			}
			return b.repos.Keys.Add(b.ctx, k)
		})
		require.Equal(t, 1, passed, "%v", errs)
		requireAll(t, errs, apikey.ErrTooManyKeysOfUser)
	})

	t.Run("ResetTokens", func(t *testing.T) {
		t.Parallel()
		b := setup(t)
		a := b.register(t, "ann@x.io")
		h1, h2, h3 := secret.SHA256URL("one"), secret.SHA256URL("two"), secret.SHA256URL("three")
		for _, h := range []string{h1, h2, h3} {
			require.NoError(t, b.repos.ResetTokens.Add(b.ctx, a.user.ID(), h, b.now.Add(time.Hour)))
		}
		change := func(_ context.Context, u *user.User) error {
			u.ChangePassword("reset", true, b.now)
			return nil
		}

		// Looking a token up uses nothing.
		for range 2 {
			uid, err := b.repos.ResetTokens.Lookup(b.ctx, h1, b.now)
			require.NoError(t, err)
			require.Equal(t, a.user.ID(), uid)
		}
		_, err := b.repos.ResetTokens.Lookup(b.ctx, h1, b.now.Add(time.Hour))
		require.ErrorIs(t, err, port.ErrResetTokenNotFound, "expired")
		_, err = b.repos.ResetTokens.Lookup(b.ctx, secret.SHA256URL("never"), b.now)
		require.ErrorIs(t, err, port.ErrResetTokenNotFound)

		// A failing redemption changes nothing: the token still works, the password and the
		// sessions are as they were.
		boom := errors.New("boom")
		err = b.repos.ResetTokens.Redeem(b.ctx, h1, b.now, func(_ context.Context, u *user.User) error {
			u.ChangePassword("never stored", true, b.now)
			return boom
		})
		require.ErrorIs(t, err, boom)
		_, err = b.repos.ResetTokens.Lookup(b.ctx, h1, b.now)
		require.NoError(t, err)
		got, err := b.repos.Users.Get(b.ctx, a.user.ID())
		require.NoError(t, err)
		require.Equal(t, "hash:ann@x.io", got.PasswordHash())
		_, err = b.repos.Sessions.Authenticate(b.ctx, a.token.Hash())
		require.NoError(t, err)

		// An expired try uses the token up.
		require.ErrorIs(t, b.repos.ResetTokens.Redeem(b.ctx, h2, b.now.Add(time.Hour), change), port.ErrResetTokenNotFound)
		require.ErrorIs(t, b.repos.ResetTokens.Redeem(b.ctx, h2, b.now, change), port.ErrResetTokenNotFound, "used up")

		// A redemption stores the password, revokes every session and voids the user's other
		// tokens, together.
		require.NoError(t, b.repos.ResetTokens.Redeem(b.ctx, h1, b.now, change))
		got, err = b.repos.Users.Get(b.ctx, a.user.ID())
		require.NoError(t, err)
		require.Equal(t, "reset", got.PasswordHash())
		_, err = b.repos.Sessions.Authenticate(b.ctx, a.token.Hash())
		require.ErrorIs(t, err, session.ErrNotFound)
		require.ErrorIs(t, b.repos.ResetTokens.Redeem(b.ctx, h1, b.now, change), port.ErrResetTokenNotFound, "one use")
		_, err = b.repos.ResetTokens.Lookup(b.ctx, h3, b.now)
		require.ErrorIs(t, err, port.ErrResetTokenNotFound, "an older link died with the reset")
		require.ErrorIs(t, b.repos.ResetTokens.Redeem(b.ctx, secret.SHA256URL("never"), b.now, change), port.ErrResetTokenNotFound)
	})

	t.Run("PasswordChangeVoidsResetTokens", func(t *testing.T) {
		t.Parallel()
		b := setup(t)
		ann, bob := b.register(t, "ann@x.io"), b.register(t, "bob@x.io")
		annTok, bobTok := secret.SHA256URL("ann"), secret.SHA256URL("bob")
		require.NoError(t, b.repos.ResetTokens.Add(b.ctx, ann.user.ID(), annTok, b.now.Add(time.Hour)))
		require.NoError(t, b.repos.ResetTokens.Add(b.ctx, bob.user.ID(), bobTok, b.now.Add(time.Hour)))
		require.NoError(t, b.repos.Users.Update(b.ctx, ann.user.ID(), func(_ context.Context, u *user.User) error {
			u.ChangePassword("changed", false, b.now)
			return nil
		}))
		_, err := b.repos.ResetTokens.Lookup(b.ctx, annTok, b.now)
		require.ErrorIs(t, err, port.ErrResetTokenNotFound)
		uid, err := b.repos.ResetTokens.Lookup(b.ctx, bobTok, b.now)
		require.NoError(t, err, "other users' links live on")
		require.Equal(t, bob.user.ID(), uid)
	})
}
