package rpc_test

import (
	"context"
	"log/slog"
	"net/url"
	"strings"
	"testing"
	"time"

	"connectrpc.com/connect"
	"github.com/stretchr/testify/require"

	identityv1 "svc.dev/proto/gen/identity/v1"
	"svc.dev/services/identity/internal/app/apptest"
	"svc.dev/services/identity/internal/app/command"
	"svc.dev/services/identity/internal/app/query"
	"svc.dev/services/identity/internal/domain/credential"
	"svc.dev/services/identity/internal/domain/session"
	"svc.dev/services/identity/internal/ports/rpc"
)

func TestResolve(t *testing.T) {
	t.Parallel()

	type testBundle struct {
		*apptest.Bundle
		server *rpc.IdentityServer
		signer session.Signer
		res    command.SessionResult
	}
	setup := func(t *testing.T) *testBundle {
		t.Helper()
		b := apptest.New(t, apptest.Options{})
		signer, err := session.NewSigner([]byte(strings.Repeat("k", 32)))
		require.NoError(t, err)
		res, err := b.App.Commands.SignUp.Handle(context.Background(), command.SignUp{Email: "ann@x.io", Password: "correct horse"})
		require.NoError(t, err)
		return &testBundle{Bundle: b, server: rpc.NewIdentityServer(b.App.Queries.Resolve, b.App.Queries.LookupOrganization, signer, slog.New(slog.DiscardHandler)), signer: signer, res: res}
	}
	resolve := func(t *testing.T, b *testBundle, req *identityv1.ResolveRequest) *identityv1.ResolveResponse {
		t.Helper()
		out, err := b.server.Resolve(context.Background(), connect.NewRequest(req))
		require.NoError(t, err)
		return out.Msg
	}
	requireSession := func(t *testing.T, b *testBundle, m *identityv1.ResolveResponse) {
		t.Helper()
		id := m.GetIdentity()
		require.NotNil(t, id, "%v", m)
		require.Equal(t, identityv1.AuthMode_AUTH_MODE_SESSION, id.GetAuthMode())
		require.Equal(t, b.res.User.ID(), id.GetUser().GetId())
		require.Equal(t, "ann@x.io", id.GetUser().GetEmail())
		require.Equal(t, b.res.Session.ActiveOrganizationID(), id.GetOrganizationId())
	}

	t.Run("SessionByCookieAndBearer", func(t *testing.T) {
		t.Parallel()
		b := setup(t)
		signed := b.signer.Sign(b.res.Token)
		requireSession(t, b, resolve(t, b, &identityv1.ResolveRequest{Cookie: "svc.session_token=" + url.QueryEscape(signed)}))
		requireSession(t, b, resolve(t, b, &identityv1.ResolveRequest{Authorization: "Bearer " + string(b.res.Token)}))
		requireSession(t, b, resolve(t, b, &identityv1.ResolveRequest{Authorization: "Bearer " + signed}))
	})

	t.Run("APIKeyByBearerAndHeader", func(t *testing.T) {
		t.Parallel()
		b := setup(t)
		c, err := b.App.Queries.Authenticate.Handle(context.Background(), queryOf(b.res.Token))
		require.NoError(t, err)
		k, raw, err := b.App.Commands.CreateAPIKey.Handle(context.Background(), command.CreateAPIKey{Caller: c})
		require.NoError(t, err)
		for _, req := range []*identityv1.ResolveRequest{{Authorization: "Bearer " + raw}, {ApiKey: raw}} {
			id := resolve(t, b, req).GetIdentity()
			require.Equal(t, identityv1.AuthMode_AUTH_MODE_API_KEY, id.GetAuthMode())
			require.Equal(t, k.ID(), id.GetApiKeyId())
			require.Equal(t, k.OrganizationID(), id.GetOrganizationId())
		}
		require.NoError(t, b.App.Commands.RevokeAPIKey.Handle(context.Background(), command.RevokeAPIKey{Caller: c, KeyID: k.ID()}))
		require.Equal(t, "unauthorized", resolve(t, b, &identityv1.ResolveRequest{ApiKey: raw}).GetRejection().GetCode())
	})

	t.Run("ExpiredAndSlidingSessions", func(t *testing.T) {
		t.Parallel()
		b := setup(t)
		req := &identityv1.ResolveRequest{Authorization: "Bearer " + string(b.res.Token)}
		// Used every six days, a session never expires; each use past a day extends it.
		for range 5 {
			b.Clock.Advance(6 * 24 * time.Hour)
			requireSession(t, b, resolve(t, b, req))
		}
		b.Clock.Advance(session.Lifetime)
		require.Equal(t, "unauthorized", resolve(t, b, req).GetRejection().GetCode())
	})

	t.Run("SignedOutAndNoActiveOrganization", func(t *testing.T) {
		t.Parallel()
		b := setup(t)
		c, err := b.App.Queries.Authenticate.Handle(context.Background(), queryOf(b.res.Token))
		require.NoError(t, err)
		_, err = b.App.Commands.SetActiveOrganization.Handle(context.Background(), command.SetActiveOrganization{Caller: c, Clear: true})
		require.NoError(t, err)
		req := &identityv1.ResolveRequest{Authorization: "Bearer " + string(b.res.Token)}
		rej := resolve(t, b, req).GetRejection()
		require.Equal(t, "no_active_organization", rej.GetCode())
		require.Contains(t, rej.GetMessage(), "set-active")
		require.NoError(t, b.App.Commands.SignOut.Handle(context.Background(), command.SignOut{Caller: c}))
		require.Equal(t, "unauthorized", resolve(t, b, req).GetRejection().GetCode())
	})
}

func queryOf(tok session.Token) query.Authenticate {
	return query.Authenticate{Credentials: credential.Credentials{Sessions: []session.Token{tok}}}
}

func TestLookupOrganization(t *testing.T) {
	t.Parallel()
	b := apptest.New(t, apptest.Options{})
	signer, err := session.NewSigner([]byte(strings.Repeat("k", 32)))
	require.NoError(t, err)
	server := rpc.NewIdentityServer(b.App.Queries.Resolve, b.App.Queries.LookupOrganization, signer, slog.New(slog.DiscardHandler))
	lookup := func(t *testing.T, slug string) *identityv1.LookupOrganizationResponse {
		t.Helper()
		out, err := server.LookupOrganization(context.Background(), connect.NewRequest(&identityv1.LookupOrganizationRequest{Slug: slug}))
		require.NoError(t, err)
		return out.Msg
	}

	require.NotNil(t, lookup(t, "acme").GetNotFound(), "before the organization exists")
	res, err := b.App.Commands.SignUp.Handle(context.Background(), command.SignUp{Email: "ann@x.io", Password: "correct horse"})
	require.NoError(t, err)
	c, err := b.App.Queries.Authenticate.Handle(context.Background(), queryOf(res.Token))
	require.NoError(t, err)
	o, err := b.App.Commands.CreateOrganization.Handle(context.Background(), command.CreateOrganization{Caller: c, Name: "Acme", Slug: "acme"})
	require.NoError(t, err)

	got := lookup(t, "acme")
	require.Nil(t, got.GetNotFound())
	require.Equal(t, o.ID(), got.GetOrganization().GetId())
	require.Equal(t, "acme", got.GetOrganization().GetSlug())
	for _, slug := range []string{"", "ACME", "acme-2", "acme ", o.ID()} {
		require.NotNil(t, lookup(t, slug).GetNotFound(), "%q", slug)
	}
}
