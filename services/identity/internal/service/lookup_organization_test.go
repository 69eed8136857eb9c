package service_test

import (
	"context"
	"errors"
	"net/http"
	"net/url"
	"strings"
	"testing"
	"time"

	"connectrpc.com/connect"
	"github.com/stretchr/testify/require"

	"svc.dev/libs/internalauth"
	"svc.dev/libs/testkit"
	identityv1 "svc.dev/proto/gen/identity/v1"
	"svc.dev/proto/gen/identity/v1/identityv1connect"
)

// lookupClient calls LookupOrganization as webhook-ingress does: signed as that service.
func (b *testBundle) lookupClient() identityv1connect.IdentityServiceClient {
	hc := &http.Client{Transport: internalauth.Transport{Signer: b.signer, Service: "webhook-ingress", Base: http.DefaultTransport, Now: time.Now}}
	return identityv1connect.NewIdentityServiceClient(hc, b.srv.URL)
}

func lookup(ctx context.Context, c identityv1connect.IdentityServiceClient, slug string) (*identityv1.LookupOrganizationResponse, error) {
	res, err := c.LookupOrganization(ctx, connect.NewRequest(&identityv1.LookupOrganizationRequest{Slug: slug}))
	if err != nil {
		return nil, err
	}
	return res.Msg, nil
}

// Identity's database is reached through a proxy that the test stops: a lookup then fails
// unavailable (never not_found), and answers again once the database is back.
func TestLookupOrganization(t *testing.T) {
	t.Parallel()
	db, err := url.Parse(testkit.NewDatabase(t))
	require.NoError(t, err)
	proxy := testkit.NewProxy(t, db.Host)
	db.Host = proxy.Addr()
	b := setup(t, map[string]string{"SVC_DATABASE_URL": db.String()})
	c := b.lookupClient()
	ctx := context.Background()

	slug := "hooks-" + strings.ToLower(strings.TrimPrefix(testkit.Name(""), "_"))
	res, err := lookup(ctx, c, slug)
	require.NoError(t, err)
	require.NotNil(t, res.GetNotFound(), "%v", res)
	require.Nil(t, res.GetOrganization())

	a := b.signUp(t, "lookup")
	r := a.c.post("/api/auth/organization/create", map[string]any{"name": "Hooks", "slug": slug})
	require.Equal(t, http.StatusOK, r.Status, r.Raw)
	res, err = lookup(ctx, c, slug)
	require.NoError(t, err)
	require.Equal(t, r.Body["id"], res.GetOrganization().GetId(), "%v", res)
	require.Equal(t, slug, res.GetOrganization().GetSlug())
	require.Nil(t, res.GetNotFound())

	// The personal organization made at sign-up is found by its slug too.
	personal := ""
	for _, o := range arr(t, a.c.get("/api/auth/organization/list").Raw) {
		if obj(t, o)["id"] == a.orgID {
			personal = obj(t, o)["slug"].(string)
		}
	}
	require.NotEmpty(t, personal)
	res, err = lookup(ctx, c, personal)
	require.NoError(t, err)
	require.Equal(t, a.orgID, res.GetOrganization().GetId())

	// Slugs match exactly; what is not a slug is simply not found.
	for _, s := range []string{"", strings.ToUpper(slug), slug + "-x", " " + slug, "Not A Slug", strings.Repeat("a", 65), "a'; --"} {
		res, err = lookup(ctx, c, s)
		require.NoError(t, err, "%q", s)
		require.NotNil(t, res.GetNotFound(), "%q: %v", s, res)
	}

	// Unsigned callers are refused before the lookup runs.
	plain, err := http.Post(b.srv.URL+identityv1connect.IdentityServiceLookupOrganizationProcedure, "application/json", strings.NewReader(`{"slug":"`+slug+`"}`))
	require.NoError(t, err)
	defer plain.Body.Close()
	require.Equal(t, http.StatusUnauthorized, plain.StatusCode)

	// The database goes away: unavailable, with the cause in identity's log only.
	proxy.Stop()
	for _, s := range []string{slug, "no-such-org"} {
		callCtx, cancel := context.WithTimeout(ctx, 10*time.Second)
		_, err = lookup(callCtx, c, s)
		cancel()
		var ce *connect.Error
		require.True(t, errors.As(err, &ce), "%q: want a Connect error, got %v", s, err)
		require.Equal(t, connect.CodeUnavailable, ce.Code(), "%v", err)
		require.NotContains(t, ce.Message(), "dial", "the cause is not sent to the caller")
	}
	require.Contains(t, b.logs.String(), "organization lookup failed")

	// Back: answers again, without a restart.
	proxy.Start()
	require.Eventually(t, func() bool {
		res, err := lookup(ctx, c, slug)
		return err == nil && res.GetOrganization().GetId() == r.Body["id"]
	}, 15*time.Second, 50*time.Millisecond)
}
