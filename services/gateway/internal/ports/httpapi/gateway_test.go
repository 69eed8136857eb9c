package httpapi_test

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"net/url"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	sdktrace "go.opentelemetry.io/otel/sdk/trace"
	"go.opentelemetry.io/otel/sdk/trace/tracetest"
	"go.opentelemetry.io/otel/trace"

	"svc.dev/libs/boot"
	"svc.dev/libs/buildinfo"
	"svc.dev/libs/httpclient"
	"svc.dev/libs/internalauth"
	"svc.dev/libs/ratelimit"
	"svc.dev/libs/telemetry"
	"svc.dev/libs/web"
	"svc.dev/proto/errs"
	"svc.dev/services/gateway/internal/app"
	"svc.dev/services/gateway/internal/ports/httpapi"
)

// testSecret is the internal secret shared by the gateway and the fake services (≥32 bytes).
const testSecret = "gateway-test-internal-secret-0123456789"

// Credentials the fake resolver knows.
const (
	sessionToken = "Bearer ses_token_1"
	apiKey       = "svc_key_aaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaa"
	cookie       = "svc.session_token=cookie_token_1.sig; theme=dark"
	noOrgToken   = "Bearer ses_no_org"
	badToken     = "Bearer ses_revoked"
)

// The identities the fake resolver answers with.
var (
	sessionIdentity = internalauth.Identity{ //nolint:gochecknoglobals // test fixture
		UserID: "usr_1", Email: "ada@example.com", OrganizationID: "org_1", AuthMode: internalauth.ModeSession,
	}
	keyIdentity = internalauth.Identity{ //nolint:gochecknoglobals // test fixture
		OrganizationID: "org_2", AuthMode: internalauth.ModeAPIKey, APIKeyID: "key_1",
	}
	allPeers = []httpapi.Peer{ //nolint:gochecknoglobals // test fixture
		httpapi.Identity, httpapi.Editor, httpapi.Orchestrator, httpapi.Scheduler, httpapi.Webhook,
	}
)

// fakeResolver is an in-memory app.Resolver: it answers by credential value (Authorization,
// then Cookie, then x-api-key), rejects anything else as unauthorized, and fails with err when
// set.
type fakeResolver struct {
	mu      sync.Mutex
	answers map[string]app.Resolution
	err     error
	calls   []app.Credentials
}

func (f *fakeResolver) Resolve(_ context.Context, c app.Credentials) (app.Resolution, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.calls = append(f.calls, c)
	if f.err != nil {
		return app.Resolution{}, f.err
	}
	for _, v := range []string{c.Authorization, c.Cookie, c.APIKey} {
		if res, ok := f.answers[v]; ok && v != "" {
			return res, nil
		}
	}
	return app.Resolution{Rejection: errs.Unauthorized, Message: "credentials not recognised"}, nil
}

func (f *fakeResolver) fail(err error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.err = err
}

func (f *fakeResolver) Calls() []app.Credentials {
	f.mu.Lock()
	defer f.mu.Unlock()
	return append([]app.Credentials(nil), f.calls...)
}

// hit is one request as a fake service received it.
type hit struct {
	Method, Path, RawQuery string
	Header                 http.Header
	Body                   []byte
	ContentLength          int64
	// Identity is what Signer.Verify found in the headers; VerifyErr is set when it found none.
	Identity  internalauth.Identity
	VerifyErr error
}

// peerService is a fake downstream service: a real boot.Base surface (signed identity
// required outside its open prefixes) whose API records every request it is given.
type peerService struct {
	peer   httpapi.Peer
	signer internalauth.Signer
	srv    *httptest.Server
	mu     sync.Mutex
	hits   []hit
}

func (p *peerService) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	body, err := io.ReadAll(r.Body)
	if err != nil {
		web.WriteJSON(w, http.StatusBadRequest, map[string]string{"error": "read"})
		return
	}
	id, verr := p.signer.Verify(r.Header, r.Method, r.URL.Path, r.URL.RawQuery, time.Now())
	p.mu.Lock()
	p.hits = append(p.hits, hit{
		Method: r.Method, Path: r.URL.Path, RawQuery: r.URL.RawQuery, Header: r.Header.Clone(),
		Body: body, ContentLength: r.ContentLength, Identity: id, VerifyErr: verr,
	})
	p.mu.Unlock()
	w.Header().Set("X-Served-By", string(p.peer))
	// A test can ask for a status and for headers on the reply.
	status := http.StatusOK
	if s, err := strconv.Atoi(r.Header.Get(testStatusHeader)); err == nil {
		status = s
	}
	for _, kv := range r.Header.Values(testReplyHeader) {
		if k, v, ok := strings.Cut(kv, "="); ok {
			w.Header().Add(k, v)
		}
	}
	web.WriteJSON(w, status, map[string]string{"peer": string(p.peer)})
}

// Request headers that make a peerService answer with a status, or with header "Name=value".
const (
	testStatusHeader = "X-Test-Status"
	testReplyHeader  = "X-Test-Reply-Header"
)

func (p *peerService) Hits() []hit {
	p.mu.Lock()
	defer p.mu.Unlock()
	return append([]hit(nil), p.hits...)
}

type response struct {
	status int
	header http.Header
	body   []byte
}

func (r response) json(t *testing.T) map[string]any {
	t.Helper()
	var m map[string]any
	require.NoError(t, json.Unmarshal(r.body, &m), "body %q", r.body)
	return m
}

// requireError checks a {"error": code, ...} answer.
func (r response) requireError(t *testing.T, status int, code errs.Code) map[string]any {
	t.Helper()
	require.Equal(t, status, r.status, "body %s", r.body)
	require.Equal(t, "application/json", r.header.Get("Content-Type"))
	m := r.json(t)
	require.Equal(t, string(code), m["error"])
	return m
}

type testBundle struct {
	signer   internalauth.Signer
	resolver *fakeResolver
	peers    map[httpapi.Peer]*peerService
	spans    *tracetest.SpanRecorder
	handler  http.Handler // the gateway's whole public surface, as the service builds it
	gw       *httptest.Server
}

// do sends a request to the gateway over the network; hdr is name, value pairs.
func (b *testBundle) do(t *testing.T, method, path string, body io.Reader, hdr ...string) response {
	t.Helper()
	req, err := http.NewRequestWithContext(t.Context(), method, b.gw.URL+path, body)
	require.NoError(t, err)
	for i := 0; i+1 < len(hdr); i += 2 {
		req.Header.Add(hdr[i], hdr[i+1])
	}
	return b.send(t, req)
}

func (b *testBundle) send(t *testing.T, req *http.Request) response {
	t.Helper()
	client := b.gw.Client()
	client.CheckRedirect = func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse }
	resp, err := client.Do(req)
	require.NoError(t, err)
	defer resp.Body.Close()
	raw, err := io.ReadAll(resp.Body)
	require.NoError(t, err)
	return response{status: resp.StatusCode, header: resp.Header, body: raw}
}

// serve runs req through the gateway in process, for requests whose body the gateway refuses
// before reading it (over the network the client could see a reset instead of the answer).
func (b *testBundle) serve(t *testing.T, req *http.Request) response {
	t.Helper()
	rec := httptest.NewRecorder()
	b.handler.ServeHTTP(rec, req)
	return response{status: rec.Code, header: rec.Header(), body: rec.Body.Bytes()}
}

// onlyHit requires that exactly one request reached any service, at peer, and returns it.
func (b *testBundle) onlyHit(t *testing.T, peer httpapi.Peer) hit {
	t.Helper()
	var got hit
	for _, p := range allPeers {
		hits := b.peers[p].Hits()
		if p == peer {
			require.Len(t, hits, 1, "requests at %s", p)
			got = hits[0]
			continue
		}
		require.Empty(t, hits, "requests at %s", p)
	}
	return got
}

func (b *testBundle) requireNoHits(t *testing.T) {
	t.Helper()
	for _, p := range allPeers {
		require.Empty(t, b.peers[p].Hits(), "requests at %s", p)
	}
}

// gatewayVouch is what the gateway signs into requests on identity's open routes: only the
// client address it saw (the tests' client is on loopback).
var gatewayVouch = internalauth.Identity{AuthMode: internalauth.ModeService, Service: "gateway", ClientIP: "127.0.0.1"} //nolint:gochecknoglobals // test fixture

// requireOpenRouteIdentity checks what an open route brought its peer: the gateway's signed
// client address for identity, nothing at all for any other service.
func requireOpenRouteIdentity(t *testing.T, peer httpapi.Peer, h hit) {
	t.Helper()
	if peer == httpapi.Identity {
		require.NoError(t, h.VerifyErr)
		require.Equal(t, gatewayVouch, h.Identity)
		require.Len(t, h.Header.Values(internalauth.HeaderIdentity), 1)
		return
	}
	requireNoIdentityHeaders(t, h.Header)
	require.ErrorIs(t, h.VerifyErr, internalauth.ErrInvalid)
}

func requireNoIdentityHeaders(t *testing.T, h http.Header) {
	t.Helper()
	for _, name := range []string{internalauth.HeaderIdentity, internalauth.HeaderTimestamp, internalauth.HeaderSignature} {
		require.Empty(t, h.Values(name), "header %s", name)
	}
}

func requireNoClientCredentials(t *testing.T, h http.Header) {
	t.Helper()
	for _, name := range []string{"Authorization", "Cookie", "X-Api-Key"} {
		require.Empty(t, h.Values(name), "header %s", name)
	}
}

// newTestBundle serves the gateway, with limiter as its rate limiter, in front of one fake
// service per peer.
func newTestBundle(t *testing.T, limiter app.RateLimiter) *testBundle {
	t.Helper()
	signer, err := internalauth.NewSigner(testSecret)
	require.NoError(t, err)
	log := slog.New(slog.DiscardHandler)
	spans := tracetest.NewSpanRecorder()
	tp := sdktrace.NewTracerProvider(sdktrace.WithSpanProcessor(spans))
	tel := telemetry.NewWithProvider(tp)
	b := &testBundle{
		signer: signer,
		resolver: &fakeResolver{answers: map[string]app.Resolution{
			sessionToken:       {Identity: sessionIdentity},
			"Bearer " + apiKey: {Identity: keyIdentity},
			apiKey:             {Identity: keyIdentity},
			cookie:             {Identity: sessionIdentity},
			noOrgToken:         {Rejection: errs.NoActiveOrganization, Message: "set an active organization first"},
		}},
		peers: map[httpapi.Peer]*peerService{},
		spans: spans,
	}
	open := map[httpapi.Peer][]string{
		httpapi.Identity: {"/api/auth/", "/api/bootstrap"},
		httpapi.Webhook:  {"/api/webhooks/"},
	}
	upstreams := map[httpapi.Peer]httpapi.Upstream{}
	for _, peer := range allPeers {
		ps := &peerService{peer: peer, signer: signer}
		base := &boot.Base{Name: string(peer), Log: log, Tel: tel, Signer: signer, Checks: map[string]web.Check{}}
		ps.srv = httptest.NewServer(base.Handler(boot.Routes{API: ps, OpenPrefixes: open[peer]}))
		t.Cleanup(ps.srv.Close)
		b.peers[peer] = ps
		u, err := url.Parse(ps.srv.URL)
		require.NoError(t, err)
		// As service.NewApplication does: forwarded requests carry the client's identity
		// or, on open routes, none.
		c := httpclient.New(httpclient.Config{Peer: string(peer), BaseURL: ps.srv.URL, Signer: signer, Telemetry: tel})
		upstreams[peer] = httpapi.Upstream{URL: u, Transport: c.Transport()}
	}
	gw := httpapi.NewGateway(log, b.resolver, limiter, upstreams).WithTrustedOrigins(testOrigins(t))
	b.handler = web.Chain(gw, web.Standard(log, tel, "gateway")...)
	b.gw = httptest.NewServer(b.handler)
	t.Cleanup(b.gw.Close)
	return b
}

func TestGateway(t *testing.T) {
	t.Parallel()

	setup := func(t *testing.T) *testBundle {
		t.Helper()
		return newTestBundle(t, newLocalLimiter(ratelimit.PerMinute(1_000_000), time.Now))
	}

	// ---------------------------------------------------------------------------------------
	// 1. The guard runs before routing; open paths are not guarded.

	t.Run("GuardBeforeRouting", func(t *testing.T) {
		t.Parallel()
		for _, tc := range []struct {
			name, method, path string
		}{
			{"KnownWorkflows", http.MethodGet, "/api/workflows"},
			{"KnownRunLogs", http.MethodGet, "/api/runs/x/logs"},
			{"KnownAdminTick", http.MethodPost, "/api/admin/tick"},
			{"KnownWorkflowRun", http.MethodPost, "/api/workflows/wf_1/run"},
			{"KnownConnectors", http.MethodGet, "/api/connectors"},
			{"UnknownAPI", http.MethodGet, "/api/nope"},
			{"UnknownRoot", http.MethodGet, "/nope"},
			{"RootPost", http.MethodPost, "/"}, // GET / is the console's page (ConsoleIsOpen)
			{"ConsoleLookalike", http.MethodGet, "/runsx"},
			{"ConsoleRouteWrite", http.MethodPost, "/runs"},
			{"AuthWithoutSlash", http.MethodGet, "/api/auth"},
			{"AuthLookalike", http.MethodPost, "/api/authx/sign-in/email"},
			{"WebhooksLookalike", http.MethodPost, "/api/webhooksx/acme"},
			{"WebhooksBare", http.MethodPost, "/api/webhooks/"},
			{"BootstrapChild", http.MethodPost, "/api/bootstrap/x"},
			{"HealthLookalike", http.MethodGet, "/healthz"},
			{"HealthTrailingSlash", http.MethodGet, "/health/"},
			{"Ready", http.MethodGet, "/ready"},
		} {
			t.Run(tc.name, func(t *testing.T) {
				t.Parallel()
				b := setup(t)
				b.do(t, tc.method, tc.path, nil).requireError(t, http.StatusUnauthorized, errs.Unauthorized)
				require.Empty(t, b.resolver.Calls(), "no credentials: identity is not asked")
				b.requireNoHits(t)
			})
		}
	})

	t.Run("Health", func(t *testing.T) {
		t.Parallel()
		b := setup(t)
		resp := b.do(t, http.MethodGet, "/health", nil)
		require.Equal(t, http.StatusOK, resp.status)
		require.JSONEq(t, `{"status":"ok","version":"`+buildinfo.Version()+`"}`, string(resp.body))
		require.Equal(t, http.StatusOK, b.do(t, http.MethodHead, "/health", nil).status)
		b.do(t, http.MethodPost, "/health", nil).requireError(t, http.StatusMethodNotAllowed, errs.MethodNotAllowed)
		// Credentials change nothing: /health never asks identity.
		require.Equal(t, http.StatusOK, b.do(t, http.MethodGet, "/health", nil, "Authorization", sessionToken).status)
		require.Empty(t, b.resolver.Calls())
		b.requireNoHits(t)
	})

	// Open routes carry no client identity: webhook-ingress gets no identity headers at all,
	// identity only the client address the gateway signs (see below).
	t.Run("OpenRoutesReachTheirServiceWithoutAnIdentity", func(t *testing.T) {
		t.Parallel()
		for _, tc := range []struct {
			name, method, path string
			peer               httpapi.Peer
		}{
			{"SignIn", http.MethodPost, "/api/auth/sign-in/email", httpapi.Identity},
			{"GetSession", http.MethodGet, "/api/auth/get-session", httpapi.Identity},
			{"Bootstrap", http.MethodPost, "/api/bootstrap", httpapi.Identity},
			{"Webhook", http.MethodPost, "/api/webhooks/acme/github", httpapi.Webhook},
		} {
			t.Run(tc.name, func(t *testing.T) {
				t.Parallel()
				b := setup(t)
				resp := b.do(t, tc.method, tc.path, strings.NewReader(`{"email":"a@b.c"}`), "Content-Type", "application/json")
				require.Equal(t, http.StatusOK, resp.status, "body %s", resp.body)
				require.Equal(t, string(tc.peer), resp.header.Get("X-Served-By"))
				h := b.onlyHit(t, tc.peer)
				require.Equal(t, tc.method, h.Method)
				require.Equal(t, tc.path, h.Path)
				require.JSONEq(t, `{"email":"a@b.c"}`, string(h.Body))
				requireOpenRouteIdentity(t, tc.peer, h)
				require.Empty(t, b.resolver.Calls())
			})
		}
	})

	t.Run("OpenRoutesKeepClientCredentials", func(t *testing.T) {
		t.Parallel()
		b := setup(t)
		// The auth layer reads the session itself, so the gateway must pass it on untouched
		// and not resolve it.
		resp := b.do(t, http.MethodPost, "/api/auth/sign-out", strings.NewReader(`{}`),
			"Cookie", cookie, "Authorization", sessionToken, "X-Api-Key", apiKey)
		require.Equal(t, http.StatusOK, resp.status)
		h := b.onlyHit(t, httpapi.Identity)
		require.Equal(t, cookie, h.Header.Get("Cookie"))
		require.Equal(t, sessionToken, h.Header.Get("Authorization"))
		require.Equal(t, apiKey, h.Header.Get("X-Api-Key"))
		requireOpenRouteIdentity(t, httpapi.Identity, h)
		require.Empty(t, b.resolver.Calls())
	})

	// Identity limits sign-in attempts per client address, and it listens where a client could
	// reach it directly with any X-Forwarded-For it likes: on its open routes the gateway signs
	// the address it saw, and only that is believed.
	t.Run("OpenRoutesToIdentityCarryTheClientAddressSigned", func(t *testing.T) {
		t.Parallel()
		for _, tc := range []struct{ name, method, path string }{
			{"SignIn", http.MethodPost, "/api/auth/sign-in/email?x=1"},
			{"GetSession", http.MethodGet, "/api/auth/get-session"},
			{"Bootstrap", http.MethodPost, "/api/bootstrap"},
		} {
			t.Run(tc.name, func(t *testing.T) {
				t.Parallel()
				b := setup(t)
				resp := b.do(t, tc.method, tc.path, strings.NewReader(`{}`), "X-Forwarded-For", "203.0.113.9", "Cookie", cookie)
				require.Equal(t, http.StatusOK, resp.status, "body %s", resp.body)
				h := b.onlyHit(t, httpapi.Identity)
				require.NoError(t, h.VerifyErr, "signed for its method, path and query")
				require.Equal(t, gatewayVouch, h.Identity)
				require.Equal(t, cookie, h.Header.Get("Cookie"), "the auth layer still reads the client's own credentials")
				require.Empty(t, b.resolver.Calls(), "and the gateway resolves nothing")
			})
		}
	})

	// ---------------------------------------------------------------------------------------
	// 2. With credentials: routing table, signed identity, nothing raw forwarded.

	t.Run("UnknownRouteWithCredentials", func(t *testing.T) {
		t.Parallel()
		for _, path := range []string{"/api/nope", "/nope", "/api", "/api/admin", "/api/admin/tick/x", "/api/runs/", "/api/workflows/", "/ready"} {
			t.Run(strings.ReplaceAll(path, "/", "_"), func(t *testing.T) {
				t.Parallel()
				b := setup(t)
				resp := b.do(t, http.MethodGet, path, nil, "Authorization", sessionToken)
				require.Equal(t, http.StatusNotFound, resp.status)
				require.JSONEq(t, `{"error":"not_found"}`, string(resp.body))
				require.Len(t, b.resolver.Calls(), 1, "the guard ran before routing")
				b.requireNoHits(t)
			})
		}
	})

	t.Run("ConsoleIsOpen", func(t *testing.T) {
		t.Parallel()
		for _, path := range []string{"/", "/runs", "/runs/run_1", "/workflows/wf_1", "/signin"} {
			b := setup(t)
			resp := b.do(t, http.MethodGet, path, nil)
			require.Equal(t, http.StatusOK, resp.status, path)
			require.Equal(t, "text/html; charset=utf-8", resp.header.Get("Content-Type"), path)
			require.Contains(t, string(resp.body), `<div id="app">`, path)
			require.Empty(t, b.resolver.Calls(), "the console's pages need no credentials")
			b.requireNoHits(t)
		}
	})

	// A browser loading a page at a path no route has gets the console (which says it is not
	// found, with a way back), without credentials and without spending a token; an API
	// client's request to the same path, and anything under /api, gets the JSON as before.
	t.Run("BrowserNavigationToUnknownPathGetsTheConsole", func(t *testing.T) {
		t.Parallel()
		const browser = "text/html,application/xhtml+xml,application/xml;q=0.9,*/*;q=0.8"
		for _, hdr := range [][]string{{"Accept", browser}, {"Accept", browser, "Cookie", cookie}} {
			for _, path := range []string{"/nope", "/ready", "/runs-old/x", "/favicon.ico"} {
				b := setup(t)
				resp := b.do(t, http.MethodGet, path, nil, hdr...)
				require.Equal(t, http.StatusNotFound, resp.status, path)
				require.Equal(t, "text/html; charset=utf-8", resp.header.Get("Content-Type"), path)
				require.Contains(t, string(resp.body), `<div id="app">`, path)
				require.Empty(t, resp.header.Get("RateLimit-Remaining"), path)
				require.Empty(t, b.resolver.Calls(), "a page needs no credentials")
				b.requireNoHits(t)
			}
		}
		for _, tc := range []struct{ method, path, accept string }{
			{http.MethodGet, "/nope", ""},
			{http.MethodGet, "/nope", "*/*"},
			{http.MethodGet, "/nope", "application/json"},
			{http.MethodPost, "/nope", browser},
			{http.MethodGet, "/api/nope", browser},
			{http.MethodGet, "/api", browser},
			{http.MethodGet, "/api/workflows", browser},
		} {
			b := setup(t)
			resp := b.do(t, tc.method, tc.path, nil, "Accept", tc.accept)
			require.Equal(t, http.StatusUnauthorized, resp.status, "%s %s %q", tc.method, tc.path, tc.accept)
			require.JSONEq(t, `{"error":"unauthorized","message":"send a session cookie, Authorization: Bearer <token>, or x-api-key"}`, string(resp.body))
		}
		b := setup(t)
		resp := b.do(t, http.MethodGet, "/api/nope", nil, "Accept", browser, "Authorization", sessionToken)
		require.Equal(t, http.StatusNotFound, resp.status)
		require.JSONEq(t, `{"error":"not_found"}`, string(resp.body))
	})

	t.Run("RoutingTable", func(t *testing.T) {
		t.Parallel()
		for _, tc := range []struct {
			method, path string
			peer         httpapi.Peer
		}{
			{http.MethodPost, "/api/workflows/wf_1/run", httpapi.Orchestrator},
			{http.MethodGet, "/api/workflows/wf_1/runs", httpapi.Orchestrator},
			{http.MethodGet, "/api/workflows", httpapi.Editor},
			{http.MethodPost, "/api/workflows", httpapi.Editor},
			{http.MethodGet, "/api/workflows/wf_1", httpapi.Editor},
			{http.MethodPatch, "/api/workflows/wf_1", httpapi.Editor},
			{http.MethodDelete, "/api/workflows/wf_1", httpapi.Editor},
			{http.MethodPost, "/api/workflows/wf_1/operations", httpapi.Editor},
			{http.MethodGet, "/api/connectors", httpapi.Editor},
			{http.MethodGet, "/api/runs", httpapi.Orchestrator},
			{http.MethodGet, "/api/runs/run_1", httpapi.Orchestrator},
			{http.MethodGet, "/api/runs/run_1/logs", httpapi.Orchestrator},
			{http.MethodPost, "/api/runs/run_1/cancel", httpapi.Orchestrator},
			{http.MethodGet, "/api/schedules", httpapi.Scheduler},
			{http.MethodPost, "/api/schedules", httpapi.Scheduler},
			{http.MethodGet, "/api/schedules/sch_1", httpapi.Scheduler},
			{http.MethodPost, "/api/admin/tick", httpapi.Scheduler},
		} {
			t.Run(tc.method+strings.ReplaceAll(tc.path, "/", "_"), func(t *testing.T) {
				t.Parallel()
				b := setup(t)
				resp := b.do(t, tc.method, tc.path, nil, "Authorization", sessionToken)
				require.Equal(t, http.StatusOK, resp.status, "body %s", resp.body)
				require.Equal(t, string(tc.peer), resp.header.Get("X-Served-By"))
				h := b.onlyHit(t, tc.peer)
				require.Equal(t, tc.method, h.Method)
				require.Equal(t, tc.path, h.Path)
				require.NoError(t, h.VerifyErr)
				require.Equal(t, sessionIdentity, h.Identity)
				requireNoClientCredentials(t, h.Header)
			})
		}
	})

	t.Run("SignedIdentityPerCredential", func(t *testing.T) {
		t.Parallel()
		for _, tc := range []struct {
			name string
			hdr  []string
			want internalauth.Identity
		}{
			{"BearerSession", []string{"Authorization", sessionToken}, sessionIdentity},
			{"Cookie", []string{"Cookie", cookie}, sessionIdentity},
			{"BearerAPIKey", []string{"Authorization", "Bearer " + apiKey}, keyIdentity},
			{"XAPIKey", []string{"X-Api-Key", apiKey}, keyIdentity},
			{"AllThree", []string{"Authorization", sessionToken, "Cookie", cookie, "X-Api-Key", apiKey}, sessionIdentity},
		} {
			t.Run(tc.name, func(t *testing.T) {
				t.Parallel()
				b := setup(t)
				resp := b.do(t, http.MethodGet, "/api/schedules", nil, tc.hdr...)
				require.Equal(t, http.StatusOK, resp.status, "body %s", resp.body)
				h := b.onlyHit(t, httpapi.Scheduler)
				require.NoError(t, h.VerifyErr)
				require.Equal(t, tc.want, h.Identity)
				requireNoClientCredentials(t, h.Header)
			})
		}
	})

	t.Run("QueryAndBodyArriveIntact", func(t *testing.T) {
		t.Parallel()
		b := setup(t)
		body := `{"name":"ünïcode & <tags>","definition":{"blocks":[]}}`
		resp := b.do(t, http.MethodPost, "/api/workflows?after=wf_0&limit=10&q=a%20b%26c", strings.NewReader(body),
			"Authorization", sessionToken, "Content-Type", "application/json", "If-Match", `"3"`)
		require.Equal(t, http.StatusOK, resp.status)
		h := b.onlyHit(t, httpapi.Editor)
		require.Equal(t, "after=wf_0&limit=10&q=a%20b%26c", h.RawQuery)
		require.Equal(t, body, string(h.Body))
		require.Equal(t, int64(len(body)), h.ContentLength)
		require.Equal(t, "application/json", h.Header.Get("Content-Type"))
		require.Equal(t, `"3"`, h.Header.Get("If-Match"))
		require.NoError(t, h.VerifyErr)
	})

	// ---------------------------------------------------------------------------------------
	// 3. Resolver rejections and failures.

	t.Run("ResolverRejects", func(t *testing.T) {
		t.Parallel()
		for _, tc := range []struct {
			name   string
			hdr    []string
			fail   error
			status int
			code   errs.Code
			msg    string
		}{
			{"NoActiveOrganization", []string{"Authorization", noOrgToken}, nil, http.StatusUnauthorized, errs.NoActiveOrganization, "set an active organization first"},
			{"Unauthorized", []string{"Authorization", badToken}, nil, http.StatusUnauthorized, errs.Unauthorized, "credentials not recognised"},
			{"UnknownAPIKey", []string{"X-Api-Key", "svc_nope"}, nil, http.StatusUnauthorized, errs.Unauthorized, "credentials not recognised"},
			{"ResolverDown", []string{"Authorization", sessionToken}, errors.New("identity: connection refused"), http.StatusServiceUnavailable, errs.Unavailable, "authentication is unavailable; retry shortly"},
		} {
			t.Run(tc.name, func(t *testing.T) {
				t.Parallel()
				b := setup(t)
				b.resolver.fail(tc.fail)
				resp := b.do(t, http.MethodGet, "/api/workflows", nil, tc.hdr...)
				m := resp.requireError(t, tc.status, tc.code)
				require.Equal(t, tc.msg, m["message"])
				require.NotContains(t, string(resp.body), "connection refused", "the cause is never sent")
				require.NotEmpty(t, resp.header.Get(web.RequestIDHeader))
				require.Len(t, b.resolver.Calls(), 1)
				b.requireNoHits(t)
			})
		}
	})

	t.Run("CredentialsReachResolverUnmodified", func(t *testing.T) {
		t.Parallel()
		for _, tc := range []struct {
			name string
			hdr  []string
			want app.Credentials
		}{
			{"APIKeyOnly", []string{"X-Api-Key", apiKey}, app.Credentials{APIKey: apiKey, ClientIP: "127.0.0.1"}},
			{"CookieOnly", []string{"Cookie", cookie}, app.Credentials{Cookie: cookie, ClientIP: "127.0.0.1"}},
			{"AuthorizationOnly", []string{"Authorization", sessionToken}, app.Credentials{Authorization: sessionToken, ClientIP: "127.0.0.1"}},
			{"UnknownAPIKeyStillAsked", []string{"X-Api-Key", "svc_unknown"}, app.Credentials{APIKey: "svc_unknown", ClientIP: "127.0.0.1"}},
			// A forwarded-for header is not the client address: clients can write it.
			{"ForwardedForIgnored", []string{"Cookie", cookie, "X-Forwarded-For", "203.0.113.9"}, app.Credentials{Cookie: cookie, ClientIP: "127.0.0.1"}},
		} {
			t.Run(tc.name, func(t *testing.T) {
				t.Parallel()
				b := setup(t)
				b.do(t, http.MethodGet, "/api/runs", nil, tc.hdr...)
				require.Equal(t, []app.Credentials{tc.want}, b.resolver.Calls())
			})
		}
	})

	// ---------------------------------------------------------------------------------------
	// 4. Identity headers sent by a client never reach a service as sent.

	t.Run("ClientIdentityHeaders", func(t *testing.T) {
		t.Parallel()
		forged := internalauth.Identity{UserID: "usr_evil", OrganizationID: "org_evil", AuthMode: internalauth.ModeService, Service: "scheduler"}
		for _, tc := range []struct {
			name, method, path string
			// signFor is the request the forged headers are correctly signed for.
			signMethod, signPath string
			creds                []string
			peer                 httpapi.Peer
			open                 bool
		}{
			{"OpenSamePath", http.MethodPost, "/api/auth/sign-in/email", http.MethodPost, "/api/auth/sign-in/email", nil, httpapi.Identity, true},
			{"OpenBootstrap", http.MethodPost, "/api/bootstrap", http.MethodPost, "/api/bootstrap", nil, httpapi.Identity, true},
			{"OpenWebhook", http.MethodPost, "/api/webhooks/acme/hook", http.MethodPost, "/api/webhooks/acme/hook", nil, httpapi.Webhook, true},
			{"OpenWithCredentials", http.MethodGet, "/api/auth/get-session", http.MethodGet, "/api/auth/get-session", []string{"Authorization", sessionToken}, httpapi.Identity, true},
			{"GuardedSamePath", http.MethodGet, "/api/workflows", http.MethodGet, "/api/workflows", []string{"Authorization", sessionToken}, httpapi.Editor, false},
			{"GuardedOtherPath", http.MethodGet, "/api/workflows", http.MethodGet, "/api/runs", []string{"Authorization", sessionToken}, httpapi.Editor, false},
			{"GuardedAPIKey", http.MethodPost, "/api/admin/tick", http.MethodPost, "/api/admin/tick", []string{"X-Api-Key", apiKey}, httpapi.Scheduler, false},
		} {
			t.Run(tc.name, func(t *testing.T) {
				t.Parallel()
				b := setup(t)
				sent := http.Header{}
				b.signer.Sign(sent, tc.signMethod, tc.signPath, "", forged, time.Now())
				req, err := http.NewRequestWithContext(t.Context(), tc.method, b.gw.URL+tc.path, strings.NewReader(`{}`))
				require.NoError(t, err)
				for k, v := range sent {
					req.Header[k] = v
				}
				for i := 0; i+1 < len(tc.creds); i += 2 {
					req.Header.Set(tc.creds[i], tc.creds[i+1])
				}
				resp := b.send(t, req)
				require.Equal(t, http.StatusOK, resp.status, "body %s", resp.body)
				h := b.onlyHit(t, tc.peer)
				if tc.open {
					requireOpenRouteIdentity(t, tc.peer, h)
					return
				}
				require.NoError(t, h.VerifyErr)
				require.NotEqual(t, forged, h.Identity)
				require.Equal(t, b.resolver.answers[tc.creds[1]].Identity, h.Identity)
				require.NotEqual(t, sent.Get(internalauth.HeaderSignature), h.Header.Get(internalauth.HeaderSignature))
				require.Len(t, h.Header.Values(internalauth.HeaderIdentity), 1)
			})
		}
	})

	t.Run("ClientIdentityHeadersWithoutCredentials", func(t *testing.T) {
		t.Parallel()
		b := setup(t)
		sent := http.Header{}
		b.signer.Sign(sent, http.MethodGet, "/api/workflows", "", sessionIdentity, time.Now())
		req, err := http.NewRequestWithContext(t.Context(), http.MethodGet, b.gw.URL+"/api/workflows", nil)
		require.NoError(t, err)
		for k, v := range sent {
			req.Header[k] = v
		}
		b.send(t, req).requireError(t, http.StatusUnauthorized, errs.Unauthorized)
		b.requireNoHits(t)
	})

	// ---------------------------------------------------------------------------------------
	// 5. Body limit.

	t.Run("BodyLimit", func(t *testing.T) {
		t.Parallel()
		for _, tc := range []struct {
			name    string
			path    string
			size    int
			chunked bool
			creds   bool
			status  int
			peer    httpapi.Peer
		}{
			{"OverWithLength", "/api/workflows", web.MaxBodyBytes + 1, false, true, http.StatusRequestEntityTooLarge, ""},
			{"FarOverWithLength", "/api/workflows", 3 * web.MaxBodyBytes, false, true, http.StatusRequestEntityTooLarge, ""},
			{"OverChunked", "/api/workflows", web.MaxBodyBytes + 1, true, true, http.StatusRequestEntityTooLarge, ""},
			{"FarOverChunked", "/api/workflows", 3 * web.MaxBodyBytes, true, true, http.StatusRequestEntityTooLarge, ""},
			{"OverChunkedOpenRoute", "/api/webhooks/acme/hook", web.MaxBodyBytes + 1, true, false, http.StatusRequestEntityTooLarge, ""},
			{"ExactWithLength", "/api/workflows", web.MaxBodyBytes, false, true, http.StatusOK, httpapi.Editor},
			{"ExactChunked", "/api/workflows", web.MaxBodyBytes, true, true, http.StatusOK, httpapi.Editor},
			{"ExactChunkedOpenRoute", "/api/webhooks/acme/hook", web.MaxBodyBytes, true, false, http.StatusOK, httpapi.Webhook},
		} {
			t.Run(tc.name, func(t *testing.T) {
				t.Parallel()
				b := setup(t)
				body := bytes.Repeat([]byte("a"), tc.size)
				req := httptest.NewRequestWithContext(t.Context(), http.MethodPost, tc.path, bytes.NewReader(body))
				require.Equal(t, int64(tc.size), req.ContentLength)
				if tc.chunked {
					req.ContentLength = -1
					req.TransferEncoding = []string{"chunked"}
				}
				if tc.creds {
					req.Header.Set("Authorization", sessionToken)
				}
				resp := b.serve(t, req)
				if tc.status != http.StatusOK {
					m := resp.requireError(t, tc.status, errs.PayloadTooLarge)
					require.NotEmpty(t, m["message"])
					b.requireNoHits(t)
					return
				}
				require.Equal(t, http.StatusOK, resp.status, "body %s", resp.body)
				h := b.onlyHit(t, tc.peer)
				require.Equal(t, body, h.Body)
				if !tc.chunked {
					require.Equal(t, int64(tc.size), h.ContentLength)
				}
			})
		}
	})

	t.Run("BodyLimitOverTheNetwork", func(t *testing.T) {
		t.Parallel()
		b := setup(t)
		// A chunked body just over the limit, sent by a real client.
		req, err := http.NewRequestWithContext(t.Context(), http.MethodPost, b.gw.URL+"/api/schedules",
			io.NopCloser(bytes.NewReader(bytes.Repeat([]byte("a"), web.MaxBodyBytes+1))))
		require.NoError(t, err)
		req.ContentLength = -1
		req.Header.Set("Authorization", sessionToken)
		b.send(t, req).requireError(t, http.StatusRequestEntityTooLarge, errs.PayloadTooLarge)
		b.requireNoHits(t)
	})

	// ---------------------------------------------------------------------------------------
	// 6. Path tricks and the request id.

	t.Run("PathTricksWithoutCredentials", func(t *testing.T) {
		t.Parallel()
		for _, path := range []string{
			"/api/auth/../workflows",
			"/api//workflows",
			"/api/webhooks/../runs",
			"/api/auth/%2e%2e/workflows",
			"/api/auth/..%2fworkflows",
			"/api/webhooks/x%2F..%2F..%2Fruns",
			"/api/bootstrap/../admin/tick",
			"/api/auth/./../../api/runs/run_1/logs",
			"//api/auth/../../api/workflows",
			"/api/webhooks/a/../../schedules",
			"/health/../api/workflows",
		} {
			t.Run(url.PathEscape(path), func(t *testing.T) {
				t.Parallel()
				b := setup(t)
				b.do(t, http.MethodGet, path, nil).requireError(t, http.StatusUnauthorized, errs.Unauthorized)
				b.requireNoHits(t)
			})
		}
	})

	t.Run("PathTricksWithCredentials", func(t *testing.T) {
		t.Parallel()
		for _, tc := range []struct {
			path, want string
			peer       httpapi.Peer
		}{
			{"/api/auth/../workflows", "/api/workflows", httpapi.Editor},
			{"/api//workflows", "/api/workflows", httpapi.Editor},
			{"/api/webhooks/../runs", "/api/runs", httpapi.Orchestrator},
			{"/api/workflows/./wf_1/../wf_2/run", "/api/workflows/wf_2/run", httpapi.Orchestrator},
			{"/api/auth/%2e%2e/schedules/sch_1", "/api/schedules/sch_1", httpapi.Scheduler},
		} {
			t.Run(url.PathEscape(tc.path), func(t *testing.T) {
				t.Parallel()
				b := setup(t)
				resp := b.do(t, http.MethodGet, tc.path, nil, "Authorization", sessionToken)
				require.Equal(t, http.StatusOK, resp.status, "body %s", resp.body)
				h := b.onlyHit(t, tc.peer)
				require.Equal(t, tc.want, h.Path)
				// The signature is for the path the service sees.
				require.NoError(t, h.VerifyErr)
				require.Equal(t, sessionIdentity, h.Identity)
			})
		}
	})

	t.Run("PathCleanedIntoOpenRoute", func(t *testing.T) {
		t.Parallel()
		b := setup(t)
		resp := b.do(t, http.MethodPost, "/api/workflows/../auth/sign-in/email", strings.NewReader(`{}`))
		require.Equal(t, http.StatusOK, resp.status)
		h := b.onlyHit(t, httpapi.Identity)
		require.Equal(t, "/api/auth/sign-in/email", h.Path)
		requireOpenRouteIdentity(t, httpapi.Identity, h)
	})

	t.Run("RequestID", func(t *testing.T) {
		t.Parallel()
		for _, tc := range []struct {
			name, path string
			hdr        []string
			status     int
			peer       httpapi.Peer
		}{
			{"GuardedEchoed", "/api/workflows", []string{"Authorization", sessionToken, web.RequestIDHeader, "req-client-42"}, http.StatusOK, httpapi.Editor},
			{"OpenEchoed", "/api/auth/get-session", []string{web.RequestIDHeader, "req-client-42"}, http.StatusOK, httpapi.Identity},
			{"GuardedMinted", "/api/runs", []string{"Authorization", sessionToken}, http.StatusOK, httpapi.Orchestrator},
			{"InsaneReplaced", "/api/runs", []string{"Authorization", sessionToken, web.RequestIDHeader, strings.Repeat("x", 200)}, http.StatusOK, httpapi.Orchestrator},
			{"Unauthorized", "/api/runs", []string{web.RequestIDHeader, "req-client-42"}, http.StatusUnauthorized, ""},
			{"NotFound", "/api/nope", []string{"Authorization", sessionToken, web.RequestIDHeader, "req-client-42"}, http.StatusNotFound, ""},
		} {
			t.Run(tc.name, func(t *testing.T) {
				t.Parallel()
				b := setup(t)
				resp := b.do(t, http.MethodGet, tc.path, nil, tc.hdr...)
				require.Equal(t, tc.status, resp.status)
				got := resp.header.Values(web.RequestIDHeader)
				require.Len(t, got, 1, "exactly one request id on the response")
				sent := ""
				for i := 0; i+1 < len(tc.hdr); i += 2 {
					if tc.hdr[i] == web.RequestIDHeader {
						sent = tc.hdr[i+1]
					}
				}
				if sent == "req-client-42" {
					require.Equal(t, sent, got[0])
				} else {
					require.True(t, strings.HasPrefix(got[0], "req_"), "minted id %q", got[0])
				}
				if tc.peer == "" {
					b.requireNoHits(t)
					return
				}
				h := b.onlyHit(t, tc.peer)
				require.Equal(t, []string{got[0]}, h.Header.Values(web.RequestIDHeader), "the service logs the same id")
			})
		}
	})

	// ---------------------------------------------------------------------------------------
	// 7. A service that is down.

	t.Run("UpstreamDown", func(t *testing.T) {
		t.Parallel()
		b := setup(t)
		b.peers[httpapi.Orchestrator].srv.Close()
		// Past the breaker's threshold (5) the answer stays the same, only faster.
		for range 8 {
			resp := b.do(t, http.MethodGet, "/api/runs", nil, "Authorization", sessionToken)
			m := resp.requireError(t, http.StatusServiceUnavailable, errs.Unavailable)
			require.Contains(t, m["message"], string(httpapi.Orchestrator))
			require.NotEmpty(t, resp.header.Get(web.RequestIDHeader))
		}
		// The other services are unaffected.
		resp := b.do(t, http.MethodGet, "/api/workflows", nil, "Authorization", sessionToken)
		require.Equal(t, http.StatusOK, resp.status)
		b.onlyHit(t, httpapi.Editor)
	})

	t.Run("OpenUpstreamDown", func(t *testing.T) {
		t.Parallel()
		b := setup(t)
		b.peers[httpapi.Identity].srv.Close()
		b.do(t, http.MethodPost, "/api/auth/sign-in/email", strings.NewReader(`{}`)).
			requireError(t, http.StatusServiceUnavailable, errs.Unavailable)
	})

	// ---------------------------------------------------------------------------------------
	// 8. One trace across the gateway and the service.

	t.Run("TraceAcrossServices", func(t *testing.T) {
		t.Parallel()
		const (
			clientTrace = "4bf92f3577b34da6a3ce929d0e0e4736"
			clientSpan  = "00f067aa0ba902b7"
		)
		for _, tc := range []struct {
			name        string
			traceparent string
		}{
			{"NewTrace", ""},
			{"ClientTraceContinued", "00-" + clientTrace + "-" + clientSpan + "-01"},
		} {
			t.Run(tc.name, func(t *testing.T) {
				t.Parallel()
				b := setup(t)
				hdr := []string{"Authorization", sessionToken}
				if tc.traceparent != "" {
					hdr = append(hdr, "Traceparent", tc.traceparent)
				}
				resp := b.do(t, http.MethodGet, "/api/workflows/wf_1", nil, hdr...)
				require.Equal(t, http.StatusOK, resp.status)

				var gwServer, gwClient, svcServer sdktrace.ReadOnlySpan
				require.Eventually(t, func() bool {
					gwServer, gwClient, svcServer = nil, nil, nil
					spans := b.spans.Ended()
					// Spans are named after the route matched, never the raw path: the
					// gateway's table entry, and the service's own route template.
					for _, s := range spans {
						switch {
						case s.SpanKind() == trace.SpanKindServer && s.Name() == "GET /api/workflows/*":
							gwServer = s
						case s.SpanKind() == trace.SpanKindClient && s.Name() == string(httpapi.Editor)+" GET /api/workflows/*":
							gwClient = s
						}
					}
					for _, s := range spans {
						if gwClient != nil && s.SpanKind() == trace.SpanKindServer && s.Parent().SpanID() == gwClient.SpanContext().SpanID() {
							svcServer = s
						}
					}
					return gwServer != nil && gwClient != nil && svcServer != nil
				}, 5*time.Second, 10*time.Millisecond, "spans: %v", spanNames(b.spans.Ended()))

				traceID := gwServer.SpanContext().TraceID()
				require.Equal(t, traceID, gwClient.SpanContext().TraceID())
				require.Equal(t, traceID, svcServer.SpanContext().TraceID())
				require.Equal(t, gwServer.SpanContext().SpanID(), gwClient.Parent().SpanID())
				require.Equal(t, gwClient.SpanContext().SpanID(), svcServer.Parent().SpanID())
				require.True(t, svcServer.Parent().IsRemote())
				if tc.traceparent == "" {
					require.False(t, gwServer.Parent().IsValid(), "the gateway starts the trace")
					return
				}
				require.Equal(t, clientTrace, traceID.String())
				require.Equal(t, clientSpan, gwServer.Parent().SpanID().String())
				require.True(t, gwServer.Parent().IsRemote())
			})
		}
	})
}

func spanNames(spans []sdktrace.ReadOnlySpan) []string {
	names := make([]string, 0, len(spans))
	for _, s := range spans {
		names = append(names, s.SpanKind().String()+":"+s.Name())
	}
	return names
}

func TestNewGatewayPanicsOnMissingDependency(t *testing.T) {
	t.Parallel()

	type testBundle struct {
		upstreams map[httpapi.Peer]httpapi.Upstream
	}
	setup := func(t *testing.T) *testBundle {
		t.Helper()
		u, err := url.Parse("http://127.0.0.1:1")
		require.NoError(t, err)
		ups := map[httpapi.Peer]httpapi.Upstream{}
		for _, p := range allPeers {
			ups[p] = httpapi.Upstream{URL: u, Transport: http.DefaultTransport}
		}
		return &testBundle{upstreams: ups}
	}
	log := slog.New(slog.DiscardHandler)

	t.Run("Complete", func(t *testing.T) {
		t.Parallel()
		b := setup(t)
		require.NotPanics(t, func() {
			httpapi.NewGateway(log, &fakeResolver{}, newLocalLimiter(ratelimit.PerMinute(1), time.Now), b.upstreams)
		})
	})
	t.Run("NilResolver", func(t *testing.T) {
		t.Parallel()
		b := setup(t)
		require.PanicsWithValue(t, "nil resolver", func() {
			httpapi.NewGateway(log, nil, newLocalLimiter(ratelimit.PerMinute(1), time.Now), b.upstreams)
		})
	})
	t.Run("NilRateLimiter", func(t *testing.T) {
		t.Parallel()
		b := setup(t)
		require.PanicsWithValue(t, "nil rate limiter", func() { httpapi.NewGateway(log, &fakeResolver{}, nil, b.upstreams) })
	})
	for _, p := range allPeers {
		t.Run("Missing"+string(p), func(t *testing.T) {
			t.Parallel()
			b := setup(t)
			delete(b.upstreams, p)
			require.PanicsWithValue(t, "no upstream for "+string(p), func() {
				httpapi.NewGateway(log, &fakeResolver{}, newLocalLimiter(ratelimit.PerMinute(1), time.Now), b.upstreams)
			})
		})
	}
}
