package identityclient_test

import (
	"context"
	"errors"
	"net/http/httptest"
	"sync"
	"testing"
	"time"

	"connectrpc.com/connect"
	"github.com/stretchr/testify/require"
	"google.golang.org/protobuf/proto"

	"svc.dev/libs/internalauth"
	"svc.dev/proto/errs"
	identityv1 "svc.dev/proto/gen/identity/v1"
	"svc.dev/proto/gen/identity/v1/identityv1connect"
	"svc.dev/services/gateway/internal/adapters/identityclient"
	"svc.dev/services/gateway/internal/app"
)

// fakeIdentity is an identity.v1 server that answers by Authorization value and records what
// it was asked.
type fakeIdentity struct {
	identityv1connect.UnimplementedIdentityServiceHandler

	mu      sync.Mutex
	answers map[string]*identityv1.ResolveResponse
	err     error
	got     []*identityv1.ResolveRequest
}

func (f *fakeIdentity) Resolve(_ context.Context, req *connect.Request[identityv1.ResolveRequest]) (*connect.Response[identityv1.ResolveResponse], error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.got = append(f.got, proto.CloneOf(req.Msg))
	if f.err != nil {
		return nil, f.err
	}
	ans, ok := f.answers[req.Msg.GetAuthorization()]
	if !ok {
		return nil, connect.NewError(connect.CodeInternal, errors.New("fake: no answer for "+req.Msg.GetAuthorization()))
	}
	return connect.NewResponse(ans), nil
}

func (f *fakeIdentity) answer(auth string, resp *identityv1.ResolveResponse) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.answers[auth] = resp
}

func (f *fakeIdentity) fail(err error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.err = err
}

func (f *fakeIdentity) requests() []*identityv1.ResolveRequest {
	f.mu.Lock()
	defer f.mu.Unlock()
	return append([]*identityv1.ResolveRequest(nil), f.got...)
}

func identityAnswer(id *identityv1.Identity) *identityv1.ResolveResponse {
	return &identityv1.ResolveResponse{Result: &identityv1.ResolveResponse_Identity{Identity: id}}
}

func rejectionAnswer(code, msg string) *identityv1.ResolveResponse {
	return &identityv1.ResolveResponse{Result: &identityv1.ResolveResponse_Rejection{Rejection: &identityv1.Rejection{Code: code, Message: msg}}}
}

func TestConnectIdentityClient(t *testing.T) {
	t.Parallel()

	type testBundle struct {
		fake   *fakeIdentity
		srv    *httptest.Server
		client *identityclient.ConnectIdentityClient
	}
	setup := func(t *testing.T) *testBundle {
		t.Helper()
		fake := &fakeIdentity{answers: map[string]*identityv1.ResolveResponse{}}
		path, h := identityv1connect.NewIdentityServiceHandler(fake)
		mux := httptest.NewServer(h)
		t.Cleanup(mux.Close)
		require.Equal(t, "/identity.v1.IdentityService/", path)
		return &testBundle{fake: fake, srv: mux, client: identityclient.New(mux.Client(), mux.URL)}
	}

	t.Run("Converts", func(t *testing.T) {
		t.Parallel()
		user := &identityv1.User{Id: "usr_1", Email: "ada@example.com"}
		for _, tc := range []struct {
			name   string
			answer *identityv1.ResolveResponse
			want   app.Resolution
		}{
			{
				"Session",
				identityAnswer(&identityv1.Identity{User: user, OrganizationId: "org_1", AuthMode: identityv1.AuthMode_AUTH_MODE_SESSION}),
				app.Resolution{Identity: internalauth.Identity{UserID: "usr_1", Email: "ada@example.com", OrganizationID: "org_1", AuthMode: internalauth.ModeSession}},
			},
			{
				"SessionWithExpiry",
				identityAnswer(&identityv1.Identity{User: user, OrganizationId: "org_1", AuthMode: identityv1.AuthMode_AUTH_MODE_SESSION, ExpiresAtUnixMs: 1_800_000_000_123}),
				app.Resolution{Identity: internalauth.Identity{UserID: "usr_1", Email: "ada@example.com", OrganizationID: "org_1", AuthMode: internalauth.ModeSession},
					ExpiresAt: time.UnixMilli(1_800_000_000_123)},
			},
			{
				"APIKey",
				identityAnswer(&identityv1.Identity{OrganizationId: "org_2", AuthMode: identityv1.AuthMode_AUTH_MODE_API_KEY, ApiKeyId: "key_1"}),
				app.Resolution{Identity: internalauth.Identity{OrganizationID: "org_2", AuthMode: internalauth.ModeAPIKey, APIKeyID: "key_1"}},
			},
			{
				"APIKeyWithUser",
				identityAnswer(&identityv1.Identity{User: user, OrganizationId: "org_2", AuthMode: identityv1.AuthMode_AUTH_MODE_API_KEY, ApiKeyId: "key_1"}),
				app.Resolution{Identity: internalauth.Identity{UserID: "usr_1", Email: "ada@example.com", OrganizationID: "org_2", AuthMode: internalauth.ModeAPIKey, APIKeyID: "key_1"}},
			},
			{
				"NoActiveOrganizationKept",
				rejectionAnswer(string(errs.NoActiveOrganization), "set an active organization first"),
				app.Resolution{Rejection: errs.NoActiveOrganization, Message: "set an active organization first"},
			},
			{
				"Unauthorized",
				rejectionAnswer(string(errs.Unauthorized), "no session or key"),
				app.Resolution{Rejection: errs.Unauthorized, Message: "no session or key"},
			},
			{
				"UnknownCodeIsUnauthorized",
				rejectionAnswer("forbidden", "role too low"),
				app.Resolution{Rejection: errs.Unauthorized, Message: "role too low"},
			},
			{
				"InternalCodeIsUnauthorized",
				rejectionAnswer(string(errs.InternalOnlyLog), ""),
				app.Resolution{Rejection: errs.Unauthorized},
			},
			{
				"EmptyCodeIsUnauthorized",
				rejectionAnswer("", ""),
				app.Resolution{Rejection: errs.Unauthorized},
			},
			{
				"NeitherMemberIsUnauthorized",
				&identityv1.ResolveResponse{},
				app.Resolution{Rejection: errs.Unauthorized},
			},
			{
				"IdentityWithoutOrganizationIsUnauthorized",
				identityAnswer(&identityv1.Identity{User: user, AuthMode: identityv1.AuthMode_AUTH_MODE_SESSION}),
				app.Resolution{Rejection: errs.Unauthorized},
			},
			{
				"EmptyIdentityIsUnauthorized",
				identityAnswer(&identityv1.Identity{}),
				app.Resolution{Rejection: errs.Unauthorized},
			},
			// identity.proto: AUTH_MODE_UNSPECIFIED "a resolved Identity never carries it, and a
			// receiver must treat it as unauthenticated".
			{
				"UnspecifiedModeIsUnauthorized",
				identityAnswer(&identityv1.Identity{User: user, OrganizationId: "org_1", AuthMode: identityv1.AuthMode_AUTH_MODE_UNSPECIFIED}),
				app.Resolution{Rejection: errs.Unauthorized},
			},
			{
				"UnknownModeIsUnauthorized",
				identityAnswer(&identityv1.Identity{User: user, OrganizationId: "org_1", AuthMode: identityv1.AuthMode(7)}),
				app.Resolution{Rejection: errs.Unauthorized},
			},
		} {
			t.Run(tc.name, func(t *testing.T) {
				t.Parallel()
				b := setup(t)
				b.fake.answer("Bearer tok", tc.answer)
				got, err := b.client.Resolve(t.Context(), app.Credentials{Authorization: "Bearer tok"})
				require.NoError(t, err)
				require.Equal(t, tc.want, got)
			})
		}
	})

	t.Run("SendsCredentialsVerbatim", func(t *testing.T) {
		t.Parallel()
		b := setup(t)
		cr := app.Credentials{
			Authorization: "Bearer svc_abc.def/+=",
			Cookie:        "svc.session_token=tok.c2ln%3D; theme=dark",
			APIKey:        "svc_key",
			ClientIP:      "2001:db8::1",
		}
		b.fake.answer(cr.Authorization, rejectionAnswer(string(errs.Unauthorized), ""))
		_, err := b.client.Resolve(t.Context(), cr)
		require.NoError(t, err)
		got := b.fake.requests()
		require.Len(t, got, 1)
		require.True(t, proto.Equal(&identityv1.ResolveRequest{
			Authorization: cr.Authorization, Cookie: cr.Cookie, ApiKey: cr.APIKey, ClientIp: cr.ClientIP,
		}, got[0]), "got %v", got[0])
	})

	t.Run("ConnectErrorIsAnError", func(t *testing.T) {
		t.Parallel()
		for _, code := range []connect.Code{connect.CodeUnavailable, connect.CodeInternal, connect.CodeDeadlineExceeded, connect.CodeUnauthenticated} {
			t.Run(code.String(), func(t *testing.T) {
				t.Parallel()
				b := setup(t)
				b.fake.fail(connect.NewError(code, errors.New("boom")))
				got, err := b.client.Resolve(t.Context(), app.Credentials{Authorization: "Bearer tok"})
				require.Error(t, err)
				require.Equal(t, code, connect.CodeOf(err))
				require.Equal(t, app.Resolution{}, got, "no identity on failure")
			})
		}
	})

	t.Run("UnreachableIsAnError", func(t *testing.T) {
		t.Parallel()
		b := setup(t)
		b.srv.Close()
		got, err := b.client.Resolve(t.Context(), app.Credentials{Cookie: "c"})
		require.Error(t, err)
		require.Equal(t, app.Resolution{}, got)
	})

	t.Run("NilHTTPClientPanics", func(t *testing.T) {
		t.Parallel()
		require.PanicsWithValue(t, "nil http client", func() { identityclient.New(nil, "http://127.0.0.1:1") })
	})
}
