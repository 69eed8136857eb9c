package app_test

import (
	"context"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"svc.dev/services/identity/internal/app/apptest"
	"svc.dev/services/identity/internal/app/auth"
	"svc.dev/services/identity/internal/app/command"
	"svc.dev/services/identity/internal/app/query"
	"svc.dev/services/identity/internal/domain/apikey"
	"svc.dev/services/identity/internal/domain/credential"
	"svc.dev/services/identity/internal/domain/org"
	"svc.dev/services/identity/internal/domain/session"
	"svc.dev/services/identity/internal/domain/user"
)

const password = "correct horse battery"

type testBundle struct {
	*apptest.Bundle
	ctx context.Context
}

func setup(t testing.TB, opts apptest.Options) *testBundle {
	t.Helper()
	return &testBundle{Bundle: apptest.New(t, opts), ctx: context.Background()}
}

func (b *testBundle) signUp(t *testing.T, email string) command.SessionResult {
	t.Helper()
	res, err := b.App.Commands.SignUp.Handle(b.ctx, command.SignUp{Email: email, Password: password, Name: "N"})
	require.NoError(t, err)
	return res
}

func sessionCreds(tok session.Token) credential.Credentials {
	return credential.Credentials{Sessions: []session.Token{tok}, SessionPresented: true}
}

func keyCreds(raw string) credential.Credentials {
	return credential.Credentials{APIKeys: []string{raw}, APIKeyPresented: true}
}

func (b *testBundle) caller(t *testing.T, tok session.Token) auth.Caller {
	t.Helper()
	c, err := b.App.Queries.Authenticate.Handle(b.ctx, query.Authenticate{Credentials: sessionCreds(tok)})
	require.NoError(t, err)
	require.NotNil(t, c.Record, "the session should be live")
	return c
}

func (b *testBundle) resolve(t *testing.T, c credential.Credentials) query.Resolution {
	t.Helper()
	res, err := b.App.Queries.Resolve.Handle(b.ctx, query.Resolve{Credentials: c})
	require.NoError(t, err)
	return res
}

func (b *testBundle) createKey(t *testing.T, tok session.Token) (*apikey.APIKey, string) {
	t.Helper()
	k, raw, err := b.App.Commands.CreateAPIKey.Handle(b.ctx, command.CreateAPIKey{Caller: b.caller(t, tok), Name: "ci"})
	require.NoError(t, err)
	return k, raw
}

func TestSignUp(t *testing.T) {
	t.Parallel()

	t.Run("CreatesUserPersonalOrganizationAndActiveSession", func(t *testing.T) {
		t.Parallel()
		b := setup(t, apptest.Options{})
		res := b.signUp(t, "Ann@Example.com")
		require.Equal(t, "ann@example.com", res.User.Email())
		orgID := res.Session.ActiveOrganizationID()
		require.NotEmpty(t, orgID)

		c := b.caller(t, res.Token)
		require.Equal(t, org.Owner, c.Record.Role)
		ps, err := b.App.Queries.ListOrganizations.Handle(b.ctx, query.ListOrganizations{Caller: c})
		require.NoError(t, err)
		require.Len(t, ps, 1)
		require.Equal(t, orgID, ps[0].ID)
		require.Regexp(t, `^personal-[a-z0-9]{8}$`, ps[0].Slug)

		r := b.resolve(t, sessionCreds(res.Token))
		require.Equal(t, &query.Identity{UserID: res.User.ID(), Email: "ann@example.com", OrganizationID: orgID, Mode: query.ModeSession, Role: "owner",
			ExpiresAt: res.Session.ExpiresAt()}, r.Identity)
	})

	t.Run("Rules", func(t *testing.T) {
		t.Parallel()
		b := setup(t, apptest.Options{})
		b.signUp(t, "ann@x.io")
		for _, tc := range []struct {
			name, email, pw string
			want            error
		}{
			{"Taken", "ANN@x.io", password, user.ErrEmailTaken},
			{"ShortPassword", "bob@x.io", "1234567", user.ErrPasswordTooShort},
			{"LongPassword", "bob@x.io", strings.Repeat("p", 129), user.ErrPasswordTooLong},
			{"BadEmail", "bob", password, user.ErrInvalidEmail},
		} {
			_, err := b.App.Commands.SignUp.Handle(b.ctx, command.SignUp{Email: tc.email, Password: tc.pw})
			require.ErrorIs(t, err, tc.want, tc.name)
		}
	})
}

func TestSignIn(t *testing.T) {
	t.Parallel()

	t.Run("StartsASessionWithTheOnlyMembershipActive", func(t *testing.T) {
		t.Parallel()
		b := setup(t, apptest.Options{})
		up := b.signUp(t, "ann@x.io")
		in, err := b.App.Commands.SignIn.Handle(b.ctx, command.SignIn{Email: "ANN@x.io", Password: password, IPAddress: "1.2.3.4"})
		require.NoError(t, err)
		require.NotEqual(t, up.Token, in.Token)
		require.Equal(t, up.Session.ActiveOrganizationID(), in.Session.ActiveOrganizationID())
		require.NotNil(t, b.resolve(t, sessionCreds(in.Token)).Identity)
	})

	t.Run("WithSeveralMembershipsNoneIsChosen", func(t *testing.T) {
		t.Parallel()
		b := setup(t, apptest.Options{})
		up := b.signUp(t, "ann@x.io")
		_, err := b.App.Commands.CreateOrganization.Handle(b.ctx, command.CreateOrganization{Caller: b.caller(t, up.Token), Name: "Team", Slug: "team"})
		require.NoError(t, err)
		in, err := b.App.Commands.SignIn.Handle(b.ctx, command.SignIn{Email: "ann@x.io", Password: password})
		require.NoError(t, err)
		require.Empty(t, in.Session.ActiveOrganizationID())
		require.Equal(t, query.RejectNoActiveOrganization, b.resolve(t, sessionCreds(in.Token)).Rejection)
	})

	t.Run("Errors", func(t *testing.T) {
		t.Parallel()
		b := setup(t, apptest.Options{})
		b.signUp(t, "ann@x.io")
		_, err := b.App.Commands.SignIn.Handle(b.ctx, command.SignIn{Email: "ann@x.io", Password: "wrong password"})
		require.ErrorIs(t, err, auth.ErrInvalidCredentials)
		_, err = b.App.Commands.SignIn.Handle(b.ctx, command.SignIn{Email: "nobody@x.io", Password: password})
		require.ErrorIs(t, err, user.ErrNotFound)
		_, err = b.App.Commands.SignIn.Handle(b.ctx, command.SignIn{Email: "not an email", Password: password})
		require.ErrorIs(t, err, user.ErrInvalidEmail)
	})

	t.Run("AttemptsAreLimitedPerIPAndEmail", func(t *testing.T) {
		t.Parallel()
		b := setup(t, apptest.Options{})
		b.signUp(t, "ann@x.io")
		for range 10 {
			_, err := b.App.Commands.SignIn.Handle(b.ctx, command.SignIn{Email: "ann@x.io", Password: "wrong password", IPAddress: "9.9.9.9"})
			require.ErrorIs(t, err, auth.ErrInvalidCredentials)
		}
		_, err := b.App.Commands.SignIn.Handle(b.ctx, command.SignIn{Email: "ann@x.io", Password: password, IPAddress: "9.9.9.9"})
		var rl *auth.RateLimitedError
		require.ErrorAs(t, err, &rl, "the right password does not help once the limit is reached")
		require.Positive(t, rl.RetryAfter)
		_, err = b.App.Commands.SignIn.Handle(b.ctx, command.SignIn{Email: "ann@x.io", Password: password, IPAddress: "8.8.8.8"})
		require.NoError(t, err, "another IP has its own bucket")
	})
}

func TestSessions(t *testing.T) {
	t.Parallel()

	t.Run("SignOutFailsTheNextRequest", func(t *testing.T) {
		t.Parallel()
		b := setup(t, apptest.Options{})
		res := b.signUp(t, "ann@x.io")
		require.NoError(t, b.App.Commands.SignOut.Handle(b.ctx, command.SignOut{Caller: b.caller(t, res.Token)}))
		require.Equal(t, query.RejectUnauthorized, b.resolve(t, sessionCreds(res.Token)).Rejection)
		require.NoError(t, b.App.Commands.SignOut.Handle(b.ctx, command.SignOut{}), "signing out twice is fine")
	})

	t.Run("SlidingExpiry", func(t *testing.T) {
		t.Parallel()
		b := setup(t, apptest.Options{})
		res := b.signUp(t, "ann@x.io")
		first := res.Session.ExpiresAt()

		b.Clock.Advance(23 * time.Hour)
		c := b.caller(t, res.Token)
		require.False(t, c.Refreshed, "within a day of the last refresh nothing is written")
		require.Equal(t, first, c.Record.Session.ExpiresAt())

		b.Clock.Advance(2 * time.Hour)
		c = b.caller(t, res.Token)
		require.True(t, c.Refreshed)
		require.Equal(t, b.Clock.Now().Add(session.Lifetime).Truncate(time.Millisecond), c.Record.Session.ExpiresAt())

		// Six days later the session would have died without that refresh; it lives on.
		b.Clock.Advance(6*24*time.Hour + time.Hour)
		require.NotNil(t, b.resolve(t, sessionCreds(res.Token)).Identity)
	})

	t.Run("ExpiredSessionIsRefused", func(t *testing.T) {
		t.Parallel()
		b := setup(t, apptest.Options{})
		res := b.signUp(t, "ann@x.io")
		b.Clock.Advance(session.Lifetime)
		require.Equal(t, query.RejectUnauthorized, b.resolve(t, sessionCreds(res.Token)).Rejection)
		c, err := b.App.Queries.Authenticate.Handle(b.ctx, query.Authenticate{Credentials: sessionCreds(res.Token)})
		require.NoError(t, err)
		require.Nil(t, c.Record)
	})

	t.Run("BearerIsTriedBeforeTheCookie", func(t *testing.T) {
		t.Parallel()
		b := setup(t, apptest.Options{})
		ann, bob := b.signUp(t, "ann@x.io"), b.signUp(t, "bob@x.io")
		r := b.resolve(t, credential.Credentials{Sessions: []session.Token{session.NewToken(), ann.Token, bob.Token}})
		require.Equal(t, ann.User.ID(), r.Identity.UserID, "a dead candidate is skipped, the first live one wins")
	})
}

func TestActiveOrganization(t *testing.T) {
	t.Parallel()

	t.Run("ClearedStaysClearedUntilSet", func(t *testing.T) {
		t.Parallel()
		b := setup(t, apptest.Options{})
		res := b.signUp(t, "ann@x.io")
		orgID := res.Session.ActiveOrganizationID()
		p, err := b.App.Commands.SetActiveOrganization.Handle(b.ctx, command.SetActiveOrganization{Caller: b.caller(t, res.Token), Clear: true})
		require.NoError(t, err)
		require.Nil(t, p)
		// The user still has exactly one membership, but unset on purpose is not chosen again.
		require.Equal(t, query.RejectNoActiveOrganization, b.resolve(t, sessionCreds(res.Token)).Rejection)

		p, err = b.App.Commands.SetActiveOrganization.Handle(b.ctx, command.SetActiveOrganization{Caller: b.caller(t, res.Token)})
		require.NoError(t, err)
		require.Nil(t, p, "without arguments: the current one, none")

		ps, err := b.App.Queries.ListOrganizations.Handle(b.ctx, query.ListOrganizations{Caller: b.caller(t, res.Token)})
		require.NoError(t, err)
		p, err = b.App.Commands.SetActiveOrganization.Handle(b.ctx, command.SetActiveOrganization{Caller: b.caller(t, res.Token), Slug: ps[0].Slug})
		require.NoError(t, err)
		require.Equal(t, orgID, p.ID)
		require.Equal(t, orgID, b.resolve(t, sessionCreds(res.Token)).Identity.OrganizationID)
	})

	t.Run("OnlyMembershipIsChosenForASessionThatNeverHadOne", func(t *testing.T) {
		t.Parallel()
		b := setup(t, apptest.Options{})
		ann := b.signUp(t, "ann@x.io")
		team, err := b.App.Commands.CreateOrganization.Handle(b.ctx, command.CreateOrganization{Caller: b.caller(t, ann.Token), Name: "Team", Slug: "team"})
		require.NoError(t, err)
		in, err := b.App.Commands.SignIn.Handle(b.ctx, command.SignIn{Email: "ann@x.io", Password: password})
		require.NoError(t, err)
		require.Empty(t, in.Session.ActiveOrganizationID(), "two memberships: none chosen")

		// Ann hands the team over and leaves: one membership is left, and it is chosen.
		bob := b.signUp(t, "bob@x.io")
		inv, err := b.App.Commands.InviteMember.Handle(b.ctx, command.InviteMember{Caller: b.caller(t, ann.Token), OrganizationID: team.ID(), Email: "bob@x.io", Role: "owner"})
		require.NoError(t, err)
		_, _, err = b.App.Commands.AcceptInvitation.Handle(b.ctx, command.AcceptInvitation{Caller: b.caller(t, bob.Token), InvitationID: inv.ID})
		require.NoError(t, err)
		_, err = b.App.Commands.LeaveOrganization.Handle(b.ctx, command.LeaveOrganization{Caller: b.caller(t, ann.Token), OrganizationID: team.ID()})
		require.NoError(t, err)
		r := b.resolve(t, sessionCreds(in.Token))
		require.NotNil(t, r.Identity, r.Rejection)
		require.Equal(t, ann.Session.ActiveOrganizationID(), r.Identity.OrganizationID)
	})

	t.Run("ForeignOrUnknownOrganization", func(t *testing.T) {
		t.Parallel()
		b := setup(t, apptest.Options{})
		ann, bob := b.signUp(t, "ann@x.io"), b.signUp(t, "bob@x.io")
		for _, cmd := range []command.SetActiveOrganization{
			{OrganizationID: bob.Session.ActiveOrganizationID()},
			{OrganizationID: "org_nope"},
			{Slug: "nope"},
		} {
			cmd.Caller = b.caller(t, ann.Token)
			_, err := b.App.Commands.SetActiveOrganization.Handle(b.ctx, cmd)
			require.ErrorIs(t, err, org.ErrNotMember)
		}
		_, err := b.App.Commands.SetActiveOrganization.Handle(b.ctx, command.SetActiveOrganization{OrganizationID: "x"})
		require.ErrorIs(t, err, auth.ErrUnauthenticated)
	})
}

func TestOrganizations(t *testing.T) {
	t.Parallel()

	t.Run("CreateBecomesActiveUnlessKept", func(t *testing.T) {
		t.Parallel()
		b := setup(t, apptest.Options{})
		ann := b.signUp(t, "ann@x.io")
		personal := ann.Session.ActiveOrganizationID()
		o, err := b.App.Commands.CreateOrganization.Handle(b.ctx, command.CreateOrganization{Caller: b.caller(t, ann.Token), Name: "Team", Slug: "team", KeepCurrentActive: true})
		require.NoError(t, err)
		require.Equal(t, personal, b.caller(t, ann.Token).Record.Session.ActiveOrganizationID())
		_, err = b.App.Commands.CreateOrganization.Handle(b.ctx, command.CreateOrganization{Caller: b.caller(t, ann.Token), Name: "Team", Slug: "team"})
		require.ErrorIs(t, err, org.ErrSlugTaken)
		o2, err := b.App.Commands.CreateOrganization.Handle(b.ctx, command.CreateOrganization{Caller: b.caller(t, ann.Token), Name: "Two", Slug: "two"})
		require.NoError(t, err)
		require.NotEqual(t, o.ID(), o2.ID())
		require.Equal(t, o2.ID(), b.caller(t, ann.Token).Record.Session.ActiveOrganizationID())
		_, err = b.App.Commands.CreateOrganization.Handle(b.ctx, command.CreateOrganization{Name: "x", Slug: "x"})
		require.ErrorIs(t, err, auth.ErrUnauthenticated)
	})

	t.Run("InviteAcceptRemove", func(t *testing.T) {
		t.Parallel()
		b := setup(t, apptest.Options{})
		ann, bob, cat := b.signUp(t, "ann@x.io"), b.signUp(t, "bob@x.io"), b.signUp(t, "cat@x.io")
		annOrg := ann.Session.ActiveOrganizationID()

		inv, err := b.App.Commands.InviteMember.Handle(b.ctx, command.InviteMember{Caller: b.caller(t, ann.Token), Email: "BOB@x.io", Role: "member"})
		require.NoError(t, err)
		mail, ok := b.Mailer.Last("invitation", "bob@x.io")
		require.True(t, ok)
		require.Contains(t, mail.Link, inv.ID)

		_, _, err = b.App.Commands.AcceptInvitation.Handle(b.ctx, command.AcceptInvitation{Caller: b.caller(t, cat.Token), InvitationID: inv.ID})
		require.ErrorIs(t, err, org.ErrNotRecipient)
		_, _, err = b.App.Commands.AcceptInvitation.Handle(b.ctx, command.AcceptInvitation{Caller: b.caller(t, bob.Token), InvitationID: "inv_nope"})
		require.ErrorIs(t, err, org.ErrInvitationNotFound)
		got, m, err := b.App.Commands.AcceptInvitation.Handle(b.ctx, command.AcceptInvitation{Caller: b.caller(t, bob.Token), InvitationID: inv.ID})
		require.NoError(t, err)
		require.Equal(t, org.Accepted, got.Status)
		require.Equal(t, org.Member, m.Role)
		require.Equal(t, annOrg, b.resolve(t, sessionCreds(bob.Token)).Identity.OrganizationID, "accepting makes it active")

		ms, err := b.App.Queries.ListMembers.Handle(b.ctx, query.ListMembers{Caller: b.caller(t, bob.Token)})
		require.NoError(t, err)
		require.Len(t, ms, 2)

		// A plain member manages nothing.
		_, err = b.App.Commands.InviteMember.Handle(b.ctx, command.InviteMember{Caller: b.caller(t, bob.Token), Email: "dan@x.io", Role: "member"})
		require.ErrorIs(t, err, org.ErrForbidden)
		_, err = b.App.Commands.RemoveMember.Handle(b.ctx, command.RemoveMember{Caller: b.caller(t, bob.Token), MemberIDOrEmail: "ann@x.io"})
		require.ErrorIs(t, err, org.ErrForbidden)
		_, err = b.App.Commands.RemoveMember.Handle(b.ctx, command.RemoveMember{Caller: b.caller(t, ann.Token), MemberIDOrEmail: "ann@x.io"})
		require.ErrorIs(t, err, org.ErrOnlyOwner)
		_, err = b.App.Queries.ListMembers.Handle(b.ctx, query.ListMembers{Caller: b.caller(t, cat.Token), OrganizationID: annOrg})
		require.ErrorIs(t, err, org.ErrNotMember)

		removed, err := b.App.Commands.RemoveMember.Handle(b.ctx, command.RemoveMember{Caller: b.caller(t, ann.Token), MemberIDOrEmail: "bob@x.io"})
		require.NoError(t, err)
		require.Equal(t, bob.User.ID(), removed.User.ID)
		require.Equal(t, query.RejectNoActiveOrganization, b.resolve(t, sessionCreds(bob.Token)).Rejection,
			"the removed member's session loses the organization on the next request")
	})

	t.Run("Leave", func(t *testing.T) {
		t.Parallel()
		b := setup(t, apptest.Options{})
		ann := b.signUp(t, "ann@x.io")
		_, err := b.App.Commands.LeaveOrganization.Handle(b.ctx, command.LeaveOrganization{Caller: b.caller(t, ann.Token), OrganizationID: ann.Session.ActiveOrganizationID()})
		require.ErrorIs(t, err, org.ErrOnlyOwner)
		_, err = b.App.Commands.LeaveOrganization.Handle(b.ctx, command.LeaveOrganization{Caller: b.caller(t, ann.Token), OrganizationID: "org_nope"})
		require.ErrorIs(t, err, org.ErrNotMember)
		_, err = b.App.Commands.LeaveOrganization.Handle(b.ctx, command.LeaveOrganization{Caller: b.caller(t, ann.Token)})
		var verr *auth.ValidationError
		require.ErrorAs(t, err, &verr)
	})
}

func TestAPIKeys(t *testing.T) {
	t.Parallel()

	t.Run("CreateResolveListRevoke", func(t *testing.T) {
		t.Parallel()
		b := setup(t, apptest.Options{})
		ann := b.signUp(t, "ann@x.io")
		k, raw := b.createKey(t, ann.Token)
		require.Equal(t, ann.Session.ActiveOrganizationID(), k.OrganizationID())

		for name, creds := range map[string]credential.Credentials{"Key": keyCreds(raw)} {
			r := b.resolve(t, creds)
			require.Equal(t, &query.Identity{UserID: ann.User.ID(), Email: "ann@x.io", OrganizationID: k.OrganizationID(),
				Mode: query.ModeAPIKey, APIKeyID: k.ID()}, r.Identity, name)
		}
		at, ok := b.Usage.Used(k.ID())
		require.True(t, ok)
		require.Equal(t, b.Clock.Now(), at)

		ks, err := b.App.Queries.ListAPIKeys.Handle(b.ctx, query.ListAPIKeys{Caller: b.caller(t, ann.Token)})
		require.NoError(t, err)
		require.Len(t, ks, 1)

		rec, err := b.App.Queries.VerifyAPIKey.Handle(b.ctx, query.VerifyAPIKey{Key: raw})
		require.NoError(t, err)
		require.Equal(t, k.ID(), rec.Key.ID())

		require.NoError(t, b.App.Commands.RevokeAPIKey.Handle(b.ctx, command.RevokeAPIKey{Caller: b.caller(t, ann.Token), KeyID: k.ID()}))
		require.Equal(t, query.RejectUnauthorized, b.resolve(t, keyCreds(raw)).Rejection)
		_, err = b.App.Queries.VerifyAPIKey.Handle(b.ctx, query.VerifyAPIKey{Key: raw})
		require.ErrorIs(t, err, auth.ErrInvalidAPIKey)
		require.ErrorIs(t, b.App.Commands.RevokeAPIKey.Handle(b.ctx, command.RevokeAPIKey{Caller: b.caller(t, ann.Token), KeyID: k.ID()}), apikey.ErrNotFound)
	})

	t.Run("FailClosedWithoutKeys", func(t *testing.T) {
		t.Parallel()
		b := setup(t, apptest.Options{})
		require.Equal(t, query.RejectUnauthorized, b.resolve(t, keyCreds("svc_"+strings.Repeat("a", 64))).Rejection)
		require.Equal(t, query.RejectUnauthorized, b.resolve(t, credential.Credentials{}).Rejection)
	})

	t.Run("AKeyCannotManageKeys", func(t *testing.T) {
		t.Parallel()
		b := setup(t, apptest.Options{})
		ann := b.signUp(t, "ann@x.io")
		k, raw := b.createKey(t, ann.Token)
		c, err := b.App.Queries.Authenticate.Handle(b.ctx, query.Authenticate{Credentials: keyCreds(raw)})
		require.NoError(t, err)
		_, _, err = b.App.Commands.CreateAPIKey.Handle(b.ctx, command.CreateAPIKey{Caller: c})
		require.ErrorIs(t, err, auth.ErrKeyCannotManageKeys)
		_, err = b.App.Queries.ListAPIKeys.Handle(b.ctx, query.ListAPIKeys{Caller: c})
		require.ErrorIs(t, err, auth.ErrKeyCannotManageKeys)
		require.ErrorIs(t, b.App.Commands.RevokeAPIKey.Handle(b.ctx, command.RevokeAPIKey{Caller: c, KeyID: k.ID()}), auth.ErrKeyCannotManageKeys)

		// Even next to a valid session: a request carrying a key is refused.
		both := b.caller(t, ann.Token)
		both.APIKeyPresented = true
		_, _, err = b.App.Commands.CreateAPIKey.Handle(b.ctx, command.CreateAPIKey{Caller: both})
		require.ErrorIs(t, err, auth.ErrKeyCannotManageKeys)
	})

	t.Run("RolesAndScope", func(t *testing.T) {
		t.Parallel()
		b := setup(t, apptest.Options{})
		ann, bob, cat := b.signUp(t, "ann@x.io"), b.signUp(t, "bob@x.io"), b.signUp(t, "cat@x.io")
		k, _ := b.createKey(t, ann.Token)
		inv, err := b.App.Commands.InviteMember.Handle(b.ctx, command.InviteMember{Caller: b.caller(t, ann.Token), Email: "bob@x.io", Role: "member"})
		require.NoError(t, err)
		_, _, err = b.App.Commands.AcceptInvitation.Handle(b.ctx, command.AcceptInvitation{Caller: b.caller(t, bob.Token), InvitationID: inv.ID})
		require.NoError(t, err)

		_, _, err = b.App.Commands.CreateAPIKey.Handle(b.ctx, command.CreateAPIKey{Caller: b.caller(t, bob.Token)})
		require.ErrorIs(t, err, org.ErrForbidden, "members use keys but do not mint them")
		_, err = b.App.Queries.ListAPIKeys.Handle(b.ctx, query.ListAPIKeys{Caller: b.caller(t, bob.Token)})
		require.ErrorIs(t, err, org.ErrForbidden)
		require.ErrorIs(t, b.App.Commands.RevokeAPIKey.Handle(b.ctx, command.RevokeAPIKey{Caller: b.caller(t, bob.Token), KeyID: k.ID()}), org.ErrForbidden)
		require.ErrorIs(t, b.App.Commands.RevokeAPIKey.Handle(b.ctx, command.RevokeAPIKey{Caller: b.caller(t, cat.Token), KeyID: k.ID()}), apikey.ErrNotFound,
			"a stranger learns nothing about the key")
		_, _, err = b.App.Commands.CreateAPIKey.Handle(b.ctx, command.CreateAPIKey{Caller: b.caller(t, cat.Token), OrganizationID: ann.Session.ActiveOrganizationID()})
		require.ErrorIs(t, err, org.ErrNotMember)
	})

	t.Run("ExpiredKeyIsRefused", func(t *testing.T) {
		t.Parallel()
		b := setup(t, apptest.Options{})
		ann := b.signUp(t, "ann@x.io")
		_, raw, err := b.App.Commands.CreateAPIKey.Handle(b.ctx, command.CreateAPIKey{Caller: b.caller(t, ann.Token), ExpiresIn: time.Hour})
		require.NoError(t, err)
		require.NotNil(t, b.resolve(t, keyCreds(raw)).Identity)
		b.Clock.Advance(time.Hour)
		require.Equal(t, query.RejectUnauthorized, b.resolve(t, keyCreds(raw)).Rejection)
	})
}

func TestPasswords(t *testing.T) {
	t.Parallel()

	t.Run("ChangeRevokesOtherSessions", func(t *testing.T) {
		t.Parallel()
		b := setup(t, apptest.Options{})
		ann := b.signUp(t, "ann@x.io")
		other, err := b.App.Commands.SignIn.Handle(b.ctx, command.SignIn{Email: "ann@x.io", Password: password})
		require.NoError(t, err)

		_, err = b.App.Commands.ChangePassword.Handle(b.ctx, command.ChangePassword{Caller: b.caller(t, ann.Token), CurrentPassword: "wrong one!", NewPassword: "new password"})
		require.ErrorIs(t, err, auth.ErrInvalidCredentials)
		_, err = b.App.Commands.ChangePassword.Handle(b.ctx, command.ChangePassword{Caller: b.caller(t, ann.Token), CurrentPassword: password, NewPassword: "short"})
		require.ErrorIs(t, err, user.ErrPasswordTooShort)

		res, err := b.App.Commands.ChangePassword.Handle(b.ctx, command.ChangePassword{Caller: b.caller(t, ann.Token), CurrentPassword: password,
			NewPassword: "new password", RevokeOtherSessions: true})
		require.NoError(t, err)
		require.NotNil(t, res.Session)
		require.Equal(t, query.RejectUnauthorized, b.resolve(t, sessionCreds(other.Token)).Rejection)
		require.Equal(t, query.RejectUnauthorized, b.resolve(t, sessionCreds(ann.Token)).Rejection, "the caller continues on the new session")
		require.Equal(t, ann.Session.ActiveOrganizationID(), b.resolve(t, sessionCreds(res.Token)).Identity.OrganizationID)

		_, err = b.App.Commands.SignIn.Handle(b.ctx, command.SignIn{Email: "ann@x.io", Password: password})
		require.ErrorIs(t, err, auth.ErrInvalidCredentials)
	})

	t.Run("ChangeKeepsSessionsByDefault", func(t *testing.T) {
		t.Parallel()
		b := setup(t, apptest.Options{})
		ann := b.signUp(t, "ann@x.io")
		res, err := b.App.Commands.ChangePassword.Handle(b.ctx, command.ChangePassword{Caller: b.caller(t, ann.Token), CurrentPassword: password, NewPassword: "new password"})
		require.NoError(t, err)
		require.Nil(t, res.Session)
		require.NotNil(t, b.resolve(t, sessionCreds(ann.Token)).Identity)
	})

	t.Run("ResetRevokesAllSessionsAndIsOneTime", func(t *testing.T) {
		t.Parallel()
		b := setup(t, apptest.Options{})
		ann := b.signUp(t, "ann@x.io")
		require.NoError(t, b.App.Commands.RequestPasswordReset.Handle(b.ctx, command.RequestPasswordReset{Email: "ANN@x.io"}))
		require.NoError(t, b.App.Commands.RequestPasswordReset.Handle(b.ctx, command.RequestPasswordReset{Email: "nobody@x.io"}), "no enumeration")
		_, sent := b.Mailer.Last("reset", "nobody@x.io")
		require.False(t, sent)
		mail, ok := b.Mailer.Last("reset", "ann@x.io")
		require.True(t, ok)
		token := apptest.TokenOf(mail.Link)
		require.Len(t, token, 32)

		require.ErrorIs(t, b.App.Commands.ResetPassword.Handle(b.ctx, command.ResetPassword{Token: token, NewPassword: "short"}), user.ErrPasswordTooShort)
		require.ErrorIs(t, b.App.Commands.ResetPassword.Handle(b.ctx, command.ResetPassword{Token: "nope", NewPassword: "new password"}), auth.ErrInvalidResetToken)
		require.NoError(t, b.App.Commands.ResetPassword.Handle(b.ctx, command.ResetPassword{Token: token, NewPassword: "new password"}),
			"a too-short attempt did not use the token up")
		require.Equal(t, query.RejectUnauthorized, b.resolve(t, sessionCreds(ann.Token)).Rejection)
		require.ErrorIs(t, b.App.Commands.ResetPassword.Handle(b.ctx, command.ResetPassword{Token: token, NewPassword: "other password"}), auth.ErrInvalidResetToken)
		_, err := b.App.Commands.SignIn.Handle(b.ctx, command.SignIn{Email: "ann@x.io", Password: "new password"})
		require.NoError(t, err)
	})

	t.Run("ResetTokenExpires", func(t *testing.T) {
		t.Parallel()
		b := setup(t, apptest.Options{})
		b.signUp(t, "ann@x.io")
		require.NoError(t, b.App.Commands.RequestPasswordReset.Handle(b.ctx, command.RequestPasswordReset{Email: "ann@x.io"}))
		mail, _ := b.Mailer.Last("reset", "ann@x.io")
		b.Clock.Advance(command.ResetTokenTTL)
		require.ErrorIs(t, b.App.Commands.ResetPassword.Handle(b.ctx, command.ResetPassword{Token: apptest.TokenOf(mail.Link), NewPassword: "new password"}), auth.ErrInvalidResetToken)
	})
}

// Requests that fail before a password could be stored cost no argon2id: a bogus reset
// token is looked up before the new password is hashed, and a wrong current password is
// verified before the new one is hashed.
func TestPasswordHashingComesLast(t *testing.T) {
	t.Parallel()

	t.Run("ResetWithAnUnknownToken", func(t *testing.T) {
		t.Parallel()
		b := setup(t, apptest.Options{})
		b.signUp(t, "ann@x.io")
		hashes, _ := b.Hasher.Calls()
		err := b.App.Commands.ResetPassword.Handle(b.ctx, command.ResetPassword{Token: "bogus", NewPassword: "long enough pw"})
		require.ErrorIs(t, err, auth.ErrInvalidResetToken)
		after, _ := b.Hasher.Calls()
		require.Equal(t, hashes, after, "no hash for a token that does not exist")
	})

	t.Run("ChangeWithAWrongCurrentPassword", func(t *testing.T) {
		t.Parallel()
		b := setup(t, apptest.Options{})
		ann := b.signUp(t, "ann@x.io")
		hashes, verifies := b.Hasher.Calls()
		_, err := b.App.Commands.ChangePassword.Handle(b.ctx, command.ChangePassword{Caller: b.caller(t, ann.Token), CurrentPassword: "wrong one!", NewPassword: "new password"})
		require.ErrorIs(t, err, auth.ErrInvalidCredentials)
		afterHashes, afterVerifies := b.Hasher.Calls()
		require.Equal(t, hashes, afterHashes, "no hash of the new password")
		require.Equal(t, verifies+1, afterVerifies)
	})
}

// The current password is checked against the hash the session was read with, outside the
// transaction; a change that lands in between is caught when the new one is stored.
func TestChangePasswordRacingAnotherChange(t *testing.T) {
	t.Parallel()
	b := setup(t, apptest.Options{})
	ann := b.signUp(t, "ann@x.io")
	stale := b.caller(t, ann.Token) // read before the other change
	other, err := b.App.Commands.SignIn.Handle(b.ctx, command.SignIn{Email: "ann@x.io", Password: password})
	require.NoError(t, err)
	_, err = b.App.Commands.ChangePassword.Handle(b.ctx, command.ChangePassword{Caller: b.caller(t, other.Token), CurrentPassword: password, NewPassword: "changed first"})
	require.NoError(t, err)
	_, err = b.App.Commands.ChangePassword.Handle(b.ctx, command.ChangePassword{Caller: stale, CurrentPassword: password, NewPassword: "changed second"})
	require.ErrorIs(t, err, auth.ErrInvalidCredentials, "the password checked is no longer the current one")
	_, err = b.App.Commands.SignIn.Handle(b.ctx, command.SignIn{Email: "ann@x.io", Password: "changed first"})
	require.NoError(t, err)
}

// A session signed out while its organization/create is under way answers UNAUTHORIZED, as
// set-active does, never an internal error.
func TestCreateOrganizationAfterSignOut(t *testing.T) {
	t.Parallel()
	b := setup(t, apptest.Options{})
	ann := b.signUp(t, "ann@x.io")
	c := b.caller(t, ann.Token)
	require.NoError(t, b.App.Commands.SignOut.Handle(b.ctx, command.SignOut{Caller: c}))
	_, err := b.App.Commands.CreateOrganization.Handle(b.ctx, command.CreateOrganization{Caller: c, Name: "Team", Slug: "team"})
	require.ErrorIs(t, err, auth.ErrUnauthenticated)
}

func TestBootstrap(t *testing.T) {
	t.Parallel()

	t.Run("ClosedWithoutTheFlag", func(t *testing.T) {
		t.Parallel()
		b := setup(t, apptest.Options{})
		_, err := b.App.Commands.Bootstrap.Handle(b.ctx, command.Bootstrap{Email: "root@x.io", Password: password})
		require.ErrorIs(t, err, auth.ErrBootstrapClosed)
	})

	t.Run("OpensOnceOnAnEmptyStore", func(t *testing.T) {
		t.Parallel()
		b := setup(t, apptest.Options{Bootstrap: true})
		open, err := b.App.Commands.Bootstrap.Open(b.ctx)
		require.NoError(t, err)
		require.True(t, open)
		res, err := b.App.Commands.Bootstrap.Handle(b.ctx, command.Bootstrap{Email: "root@x.io", Password: password, OrganizationName: "Acme"})
		require.NoError(t, err)
		require.Equal(t, "Acme", res.Organization.Profile().Name)
		require.NotNil(t, b.resolve(t, keyCreds(res.RawKey)).Identity)
		require.NotNil(t, b.resolve(t, sessionCreds(res.Token)).Identity)

		_, err = b.App.Commands.Bootstrap.Handle(b.ctx, command.Bootstrap{Email: "two@x.io", Password: password})
		require.ErrorIs(t, err, auth.ErrBootstrapClosed)
	})

	t.Run("ClosedOnceSomeoneSignedUp", func(t *testing.T) {
		t.Parallel()
		b := setup(t, apptest.Options{Bootstrap: true})
		b.signUp(t, "ann@x.io")
		_, err := b.App.Commands.Bootstrap.Handle(b.ctx, command.Bootstrap{Email: "root@x.io", Password: password})
		require.ErrorIs(t, err, auth.ErrBootstrapClosed)
	})
}

// FuzzResolve feeds arbitrary credentials to Resolve over a store that holds one live
// session and one live key: whatever comes in, an identity comes out only when the input
// carries that token or that key.
func FuzzResolve(f *testing.F) {
	b := setup(f, apptest.Options{})
	res, err := b.App.Commands.SignUp.Handle(b.ctx, command.SignUp{Email: "ann@x.io", Password: password})
	if err != nil {
		f.Fatal(err)
	}
	c, err := b.App.Queries.Authenticate.Handle(b.ctx, query.Authenticate{Credentials: sessionCreds(res.Token)})
	if err != nil {
		f.Fatal(err)
	}
	_, raw, err := b.App.Commands.CreateAPIKey.Handle(b.ctx, command.CreateAPIKey{Caller: c})
	if err != nil {
		f.Fatal(err)
	}
	signer, err := session.NewSigner([]byte(strings.Repeat("s", 32)))
	if err != nil {
		f.Fatal(err)
	}
	f.Add("Bearer "+string(res.Token), "", "")
	f.Add("", "svc.session_token="+signer.Sign(res.Token), "")
	f.Add("", "", raw)
	f.Add("Bearer "+raw[:len(raw)-1]+"x", "svc.session_token=x", "svc_")
	f.Add("Bearer "+strings.Repeat("A", 32), "", "")
	f.Fuzz(func(t *testing.T, authorization, cookie, xAPIKey string) {
		out, err := b.App.Queries.Resolve.Handle(b.ctx, query.Resolve{Credentials: credential.Parse(authorization, cookie, xAPIKey, signer)})
		require.NoError(t, err)
		if out.Identity == nil {
			require.Contains(t, []string{query.RejectUnauthorized, query.RejectNoActiveOrganization}, out.Rejection)
			return
		}
		all := authorization + cookie + xAPIKey
		require.True(t, strings.Contains(all, string(res.Token)) || strings.Contains(all, raw), "identity from garbage: %q %q %q", authorization, cookie, xAPIKey)
	})
}
