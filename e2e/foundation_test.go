package e2e

import (
	"bytes"
	"context"
	"encoding/json"
	"io"
	"net/http"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/stretchr/testify/require"

	"svc.dev/e2e/harness"
	"svc.dev/libs/internalauth"
	"svc.dev/libs/testkit"
)

type response struct {
	Status int
	Header http.Header
	Body   map[string]any
	Raw    string
}

func call(t *testing.T, method, url string, body io.Reader, hdr ...string) response {
	t.Helper()
	req, err := http.NewRequestWithContext(harness.Context(t), method, url, body)
	require.NoError(t, err)
	for i := 0; i+1 < len(hdr); i += 2 {
		req.Header.Set(hdr[i], hdr[i+1])
	}
	resp, err := http.DefaultClient.Do(req)
	require.NoError(t, err)
	defer resp.Body.Close()
	raw, err := io.ReadAll(resp.Body)
	require.NoError(t, err)
	r := response{Status: resp.StatusCode, Header: resp.Header, Raw: string(raw)}
	_ = json.Unmarshal(raw, &r.Body)
	return r
}

func TestFoundation(t *testing.T) {
	t.Parallel()
	sys := harness.Start(t, harness.Options{})

	t.Run("Health", func(t *testing.T) {
		t.Parallel()
		r := call(t, "GET", sys.BaseURL+"/health", nil)
		require.Equal(t, http.StatusOK, r.Status)
		require.Equal(t, "ok", r.Body["status"])
		require.NotEmpty(t, r.Body["version"])
		require.NotEmpty(t, r.Header.Get("X-Request-Id"))
	})

	t.Run("GuardRunsBeforeRouting", func(t *testing.T) {
		t.Parallel()
		for _, p := range []string{"/api/workflows", "/api/runs/run_x/logs", "/api/admin/tick", "/api/nope", "/nope", "/", "/ready", "/api/auth/../workflows"} {
			for _, method := range []string{"GET", "POST"} {
				if p == "/" && method == "GET" {
					continue // the web console's page: open, like the assets it loads
				}
				r := call(t, method, sys.BaseURL+p, nil)
				require.Equal(t, http.StatusUnauthorized, r.Status, "%s %s", method, p)
				require.Equal(t, "unauthorized", r.Body["error"], "%s %s", method, p)
			}
		}
		// The console's page is served without credentials, as a page, not as an API answer.
		page, err := http.Get(sys.BaseURL + "/")
		require.NoError(t, err)
		_ = page.Body.Close()
		require.Equal(t, http.StatusOK, page.StatusCode)
		require.Contains(t, page.Header.Get("Content-Type"), "text/html")
		// Credentials identity does not recognise are refused the same way, known route or not.
		for _, hdr := range [][]string{
			{"Authorization", "Bearer not-a-session"},
			{"X-Api-Key", "svc_notakey"},
			{"Cookie", "svc.session_token=forged"},
		} {
			r := call(t, "GET", sys.BaseURL+"/api/nope", nil, hdr...)
			require.Equal(t, http.StatusUnauthorized, r.Status, hdr)
			require.Equal(t, "unauthorized", r.Body["error"])
		}
	})

	t.Run("OpenPathsReachTheirService", func(t *testing.T) {
		t.Parallel()
		// Not guarded: they reach identity and webhook-ingress, which have no such routes and
		// answer their own JSON 404 (bootstrap is closed without SVC_BOOTSTRAP=1).
		for _, p := range []string{"/api/auth/no-such-route", "/api/bootstrap", "/api/webhooks/unknown"} {
			r := call(t, "GET", sys.BaseURL+p, nil)
			require.Equal(t, http.StatusNotFound, r.Status, p)
			require.Equal(t, "not_found", r.Body["error"], p)
		}
	})

	t.Run("BodyOverOneMiB", func(t *testing.T) {
		t.Parallel()
		big := bytes.Repeat([]byte("x"), 1<<20+1)
		r := call(t, "POST", sys.BaseURL+"/api/auth/sign-up/email", bytes.NewReader(big), "Content-Type", "application/json")
		require.Equal(t, http.StatusRequestEntityTooLarge, r.Status)
		require.Equal(t, "payload_too_large", r.Body["error"])

		// Unknown length (chunked): refused while reading, before it reaches a service.
		r = call(t, "POST", sys.BaseURL+"/api/webhooks/x", io.MultiReader(bytes.NewReader(big)), "Content-Type", "application/json")
		require.Equal(t, http.StatusRequestEntityTooLarge, r.Status)
		require.Equal(t, "payload_too_large", r.Body["error"])
	})

	t.Run("ForgedIdentityStraightToAService", func(t *testing.T) {
		t.Parallel()
		forger, err := internalauth.NewSigner(strings.Repeat("f", 32))
		require.NoError(t, err)
		real, err := internalauth.NewSigner(sys.Secret)
		require.NoError(t, err)
		id := internalauth.Identity{UserID: "usr_x", OrganizationID: "org_x", AuthMode: internalauth.ModeSession}

		const probe = "/api/no-such-route"
		for _, svc := range []harness.Service{harness.Identity, harness.Editor, harness.Orchestrator, harness.Scheduler, harness.Webhook} {
			url := sys.URLs[svc] + probe

			r := call(t, "GET", url, nil)
			require.Equal(t, http.StatusUnauthorized, r.Status, "%s without identity", svc)
			require.Equal(t, "unauthorized", r.Body["error"])

			h := http.Header{}
			forger.Sign(h, "GET", probe, "", id, time.Now())
			r = call(t, "GET", url, nil, internalauth.HeaderIdentity, h.Get(internalauth.HeaderIdentity),
				internalauth.HeaderTimestamp, h.Get(internalauth.HeaderTimestamp), internalauth.HeaderSignature, h.Get(internalauth.HeaderSignature))
			require.Equal(t, http.StatusUnauthorized, r.Status, "%s with a forged signature", svc)

			// Signed for another path: a captured header set cannot be replayed elsewhere.
			h = http.Header{}
			real.Sign(h, "GET", "/api/other", "", id, time.Now())
			r = call(t, "GET", url, nil, internalauth.HeaderIdentity, h.Get(internalauth.HeaderIdentity),
				internalauth.HeaderTimestamp, h.Get(internalauth.HeaderTimestamp), internalauth.HeaderSignature, h.Get(internalauth.HeaderSignature))
			require.Equal(t, http.StatusUnauthorized, r.Status, "%s with a signature for another path", svc)

			// Signed for another query: nor with its query changed.
			h = http.Header{}
			real.Sign(h, "GET", probe, "limit=1", id, time.Now())
			r = call(t, "GET", url+"?limit=500", nil, internalauth.HeaderIdentity, h.Get(internalauth.HeaderIdentity),
				internalauth.HeaderTimestamp, h.Get(internalauth.HeaderTimestamp), internalauth.HeaderSignature, h.Get(internalauth.HeaderSignature))
			require.Equal(t, http.StatusUnauthorized, r.Status, "%s with a signature for another query", svc)

			// Properly signed: the guard lets it through and the router answers (no such route).
			h = http.Header{}
			real.Sign(h, "GET", probe, "limit=1", id, time.Now())
			r = call(t, "GET", url+"?limit=1", nil, internalauth.HeaderIdentity, h.Get(internalauth.HeaderIdentity),
				internalauth.HeaderTimestamp, h.Get(internalauth.HeaderTimestamp), internalauth.HeaderSignature, h.Get(internalauth.HeaderSignature))
			require.Equal(t, http.StatusNotFound, r.Status, "%s with a valid signature", svc)
		}

		// The identity RPC is internal: unsigned callers are refused too.
		r := call(t, "POST", sys.URLs[harness.Identity]+"/identity.v1.IdentityService/Resolve", strings.NewReader(`{}`), "Content-Type", "application/json")
		require.Equal(t, http.StatusUnauthorized, r.Status)
	})

	t.Run("ServicesAreReady", func(t *testing.T) {
		t.Parallel()
		r := call(t, "GET", sys.AdminURL+"/ready", nil)
		require.Equal(t, http.StatusOK, r.Status, r.Raw)
		for _, svc := range []harness.Service{harness.Identity, harness.Editor, harness.Orchestrator, harness.Scheduler, harness.Webhook} {
			r := call(t, "GET", sys.URLs[svc]+"/ready", nil)
			require.Equal(t, http.StatusOK, r.Status, "%s: %s", svc, r.Raw)
			require.Equal(t, "ok", r.Body["status"])
		}
	})
}

// Two replicas of one service starting together on an empty schema both come up, and each
// migration ran once.
func TestReplicasMigrateOnce(t *testing.T) {
	t.Parallel()
	dbURL := testkit.NewDatabase(t)
	secret := strings.Repeat("s", 32)

	type started struct {
		p    *harness.Process
		addr string
	}
	var wg sync.WaitGroup
	procs := make([]started, 2)
	for i := range procs {
		ln := listenAddr(t)
		env := append(environ(), "SVC_DATABASE_URL="+dbURL, "SVC_INTERNAL_SECRET="+secret, "SVC_EDITOR_ADDR="+ln)
		procs[i] = started{p: harness.StartProcess(t, harness.Editor, env), addr: ln}
	}
	for _, s := range procs {
		wg.Go(func() { s.p.WaitHealthy(t, "http://"+s.addr, 30*time.Second) })
	}
	wg.Wait()

	ctx := context.Background()
	conn, err := pgx.Connect(ctx, dbURL)
	require.NoError(t, err)
	defer conn.Close(ctx)
	var applied, distinct int
	require.NoError(t, conn.QueryRow(ctx, "SELECT count(*), count(DISTINCT version_id) FROM editor.goose_db_version WHERE version_id > 0").Scan(&applied, &distinct))
	require.Equal(t, distinct, applied, "no migration recorded twice")
	require.Positive(t, applied)

	logged := strings.Count(procs[0].p.Output(), `"msg":"migration applied"`) + strings.Count(procs[1].p.Output(), `"msg":"migration applied"`)
	require.Equal(t, applied, logged, "between them the two replicas applied each migration exactly once")
}

// /ready turns 503 when the service's Postgres goes away, and 200 again when it is back.
func TestReadyFollowsPostgres(t *testing.T) {
	t.Parallel()
	dbURL := testkit.NewDatabase(t)
	proxy := testkit.NewProxy(t, hostPort(t, dbURL))
	viaProxy := replaceHost(t, dbURL, proxy.Addr())

	addr := listenAddr(t)
	env := append(environ(), "SVC_DATABASE_URL="+viaProxy, "SVC_INTERNAL_SECRET="+strings.Repeat("r", 32), "SVC_SCHEDULER_ADDR="+addr)
	p := harness.StartProcess(t, harness.Scheduler, env)
	p.WaitHealthy(t, "http://"+addr, 30*time.Second)

	readyStatus := func() int { return call(t, "GET", "http://"+addr+"/ready", nil).Status }
	require.Equal(t, http.StatusOK, readyStatus())

	proxy.Stop()
	require.Eventually(t, func() bool { return readyStatus() == http.StatusServiceUnavailable }, 15*time.Second, 50*time.Millisecond)
	r := call(t, "GET", "http://"+addr+"/ready", nil)
	require.Equal(t, map[string]any{"status": "unavailable", "checks": map[string]any{"postgres": "unavailable"}}, r.Body)
	// Liveness is not readiness: /health stays 200 while Postgres is away.
	require.Equal(t, http.StatusOK, call(t, "GET", "http://"+addr+"/health", nil).Status)

	proxy.Start()
	require.Eventually(t, func() bool { return readyStatus() == http.StatusOK }, 15*time.Second, 50*time.Millisecond)
}

// One request through the gateway to a service is one trace with spans of both.
func TestOneTraceAcrossServices(t *testing.T) {
	t.Parallel()
	col := harness.NewCollector(t)
	sys := harness.Start(t, harness.Options{Env: map[string]string{
		"OTEL_EXPORTER_OTLP_ENDPOINT": col.URL,
		"OTEL_BSP_SCHEDULE_DELAY":     "50",
	}})

	const traceID = "4bf92f3577b34da6a3ce929d0e0e4736"
	r := call(t, "GET", sys.BaseURL+"/api/auth/get-session", nil, "traceparent", "00-"+traceID+"-00f067aa0ba902b7-01")
	require.Equal(t, http.StatusOK, r.Status, r.Raw)

	var spans []harness.Span
	require.Eventually(t, func() bool {
		spans = nil
		for _, s := range col.Spans() {
			if s.TraceID == traceID {
				spans = append(spans, s)
			}
		}
		services := map[string]bool{}
		for _, s := range spans {
			services[s.Service] = true
		}
		return services["gateway"] && services["identity"]
	}, 20*time.Second, 50*time.Millisecond)

	byID := map[string]harness.Span{}
	for _, s := range spans {
		byID[s.SpanID] = s
	}
	for _, s := range spans {
		if s.Service == "identity" && s.ParentID != "" {
			parent, ok := byID[s.ParentID]
			if ok && parent.Service == "gateway" {
				return // the service's span hangs off the gateway's: one trace, both services
			}
		}
	}
	t.Fatalf("no identity span is a child of a gateway span: %+v", spans)
}
