package service_test

import (
	"bytes"
	"context"
	"encoding/json"
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"connectrpc.com/connect"
	"github.com/stretchr/testify/require"

	"svc.dev/libs/boot"
	"svc.dev/libs/internalauth"
	"svc.dev/libs/testkit"
	"svc.dev/libs/wire"
	editorv1 "svc.dev/proto/gen/editor/v1"
	"svc.dev/proto/gen/editor/v1/editorv1connect"
	"svc.dev/services/run-orchestrator/internal/service"
)

// These tests drive the real composition (Postgres and River included) over HTTP, signing each
// request with the identity the gateway would send. The editor is a stub editor.v1 server whose
// workflows each test sets, so pinning can be shown by changing them after dispatch.

type fakeEditor struct {
	editorv1connect.UnimplementedEditorServiceHandler
	mu        sync.Mutex
	workflows map[string]*editorv1.Workflow // by org + "/" + id
	reads     atomic.Int64
}

func (f *fakeEditor) GetWorkflow(_ context.Context, req *connect.Request[editorv1.GetWorkflowRequest]) (*connect.Response[editorv1.GetWorkflowResponse], error) {
	f.reads.Add(1)
	f.mu.Lock()
	defer f.mu.Unlock()
	wf, ok := f.workflows[req.Msg.GetOrganizationId()+"/"+req.Msg.GetId()]
	if !ok {
		return connect.NewResponse(&editorv1.GetWorkflowResponse{Result: &editorv1.GetWorkflowResponse_NotFound{NotFound: &editorv1.NotFound{}}}), nil
	}
	return connect.NewResponse(&editorv1.GetWorkflowResponse{Result: &editorv1.GetWorkflowResponse_Workflow{Workflow: wf}}), nil
}

type system struct {
	url    string
	dbURL  string
	app    *service.Application
	signer internalauth.Signer
	editor *fakeEditor
}

type testBundle struct {
	sys *system
	org string
}

type response struct {
	Status int
	Body   map[string]any
	Raw    string
}

func start(t testing.TB) *system {
	t.Helper()
	return startWith(t, nil)
}

// startWith starts the service with mod applied to its configuration.
func startWith(t testing.TB, mod func(*service.Config)) *system {
	t.Helper()
	return startLogging(t, mod, slog.New(slog.DiscardHandler))
}

// startLogging starts the service with mod applied to its configuration, logging to log.
func startLogging(t testing.TB, mod func(*service.Config), log *slog.Logger) *system {
	t.Helper()
	secret := strings.Repeat("s", 32)
	signer, err := internalauth.NewSigner(secret)
	require.NoError(t, err)
	fe := &fakeEditor{workflows: map[string]*editorv1.Workflow{}}
	path, h := editorv1connect.NewEditorServiceHandler(fe)
	mux := http.NewServeMux()
	mux.Handle(path, signer.Require(time.Now)(h))
	editorSrv := httptest.NewServer(mux)
	t.Cleanup(editorSrv.Close)

	cfg := service.Config{Addr: ":0", EditorURL: editorSrv.URL, Workers: 20, Base: boot.Config{
		DatabaseURL: testkit.NewDatabase(t), InternalSecret: secret, LogLevel: slog.LevelError, Drain: time.Second,
		// Test packages share one Postgres (max_connections 100): a small pool per replica.
		DatabaseMaxConns: 10,
	}}
	if mod != nil {
		mod(&cfg)
	}
	app, err := service.NewApplication(context.Background(), cfg, log)
	require.NoError(t, err)
	t.Cleanup(app.Close)
	srv := httptest.NewServer(app.Handler())
	t.Cleanup(srv.Close)
	return &system{url: srv.URL, dbURL: cfg.Base.DatabaseURL, app: app, signer: signer, editor: fe}
}

func (s *system) setup(t testing.TB) *testBundle {
	t.Helper()
	return &testBundle{sys: s, org: wire.NewID(wire.Organization)}
}

// workflow stores (or replaces) a workflow of the bundle's organization in the stub editor.
func (b *testBundle) workflow(t testing.TB, id string, version int64, def string, problems ...string) {
	t.Helper()
	wf := &editorv1.Workflow{Id: id, OrganizationId: b.org, Name: id, Version: version, DefinitionJson: def}
	for _, p := range problems {
		wf.ValidationErrors = append(wf.ValidationErrors, &editorv1.ValidationError{Code: p, Message: p})
	}
	b.sys.editor.mu.Lock()
	b.sys.editor.workflows[b.org+"/"+id] = wf
	b.sys.editor.mu.Unlock()
}

func (b *testBundle) do(t testing.TB, method, path string, body any, hdr ...string) response {
	t.Helper()
	return b.doAs(t, b.org, method, path, body, hdr...)
}

func (b *testBundle) doAs(t testing.TB, org, method, path string, body any, hdr ...string) response {
	t.Helper()
	return b.doWith(t, internalauth.Identity{UserID: "usr_test", OrganizationID: org, AuthMode: internalauth.ModeSession}, method, path, body, hdr...)
}

// doWith sends the request on behalf of id, signed as the gateway signs it.
func (b *testBundle) doWith(t testing.TB, id internalauth.Identity, method, path string, body any, hdr ...string) response {
	t.Helper()
	var rd io.Reader
	if raw, ok := body.(rawBody); ok {
		rd = strings.NewReader(string(raw))
	} else if body != nil {
		raw, err := json.Marshal(body)
		require.NoError(t, err)
		rd = bytes.NewReader(raw)
	}
	// The identity rides on the context; internalauth.Transport signs it as the gateway does.
	ctx := internalauth.WithIdentity(t.Context(), id)
	req, err := http.NewRequestWithContext(ctx, method, b.sys.url+path, rd)
	require.NoError(t, err)
	for i := 0; i+1 < len(hdr); i += 2 {
		req.Header.Set(hdr[i], hdr[i+1])
	}
	client := &http.Client{Transport: internalauth.Transport{Signer: b.sys.signer, Base: http.DefaultTransport, Now: time.Now}}
	resp, err := client.Do(req)
	require.NoError(t, err)
	defer resp.Body.Close()
	raw, err := io.ReadAll(resp.Body)
	require.NoError(t, err)
	r := response{Status: resp.StatusCode, Raw: string(raw)}
	_ = json.Unmarshal(raw, &r.Body)
	return r
}

func (b *testBundle) startRun(t testing.TB, wf string, body any, hdr ...string) string {
	t.Helper()
	r := b.do(t, "POST", "/api/workflows/"+wf+"/run", body, hdr...)
	require.Equal(t, http.StatusAccepted, r.Status, r.Raw)
	require.Equal(t, "svc-runtime", r.Body["spec"])
	return r.Body["runId"].(string)
}

// waitStatus polls the run until it has status, and returns it.
func (b *testBundle) waitStatus(t *testing.T, runID, status string) map[string]any {
	t.Helper()
	var last response
	require.Eventually(t, func() bool {
		last = b.do(t, "GET", "/api/runs/"+runID, nil)
		return last.Body["status"] == status
	}, 15*time.Second, 10*time.Millisecond, "run %s never reached %s", runID, status)
	return last.Body
}

func (b *testBundle) logs(t *testing.T, runID string) []map[string]any {
	t.Helper()
	var out []map[string]any
	cursor := ""
	for {
		path := "/api/runs/" + runID + "/logs?limit=2"
		if cursor != "" {
			path += "&after=" + cursor
		}
		r := b.do(t, "GET", path, nil)
		require.Equal(t, http.StatusOK, r.Status, r.Raw)
		items := r.Body["items"].([]any)
		require.NotEmpty(t, r.Body["nextCursor"], "nextCursor is returned even on the last page")
		cursor = r.Body["nextCursor"].(string)
		if len(items) == 0 {
			return out
		}
		for _, it := range items {
			out = append(out, it.(map[string]any))
		}
	}
}

const manual = `{"block_id":"start","type":"trigger.manual","params":{}}`

func def(blocks []string, edges ...string) string {
	return `{"blocks":[` + strings.Join(blocks, ",") + `],"edges":[` + strings.Join(edges, ",") + `]}`
}

func edge(from, to string) string {
	return `{"block_id":"` + from + `","target_block_id":"` + to + `"}`
}

func TestRuns(t *testing.T) {
	t.Parallel()
	sys := start(t)

	t.Run("TemplatesBetweenBlocksAndPinning", func(t *testing.T) {
		t.Parallel()
		b := sys.setup(t)
		b.workflow(t, "wf_a", 1, def([]string{manual,
			`{"block_id":"double","type":"transform","params":{"value":{"n":"{{ input.n * 2 }}","who":"run {{ run.id }}"}}}`,
			`{"block_id":"say","type":"log","params":{"message":"n is {{ steps.double.output.n }}"}}`,
		}, edge("start", "double"), edge("double", "say")))
		id := b.startRun(t, "wf_a", map[string]any{"input": map[string]any{"n": 21}})
		// A later edit never reaches the run.
		b.workflow(t, "wf_a", 2, def([]string{manual}))
		got := b.waitStatus(t, id, "completed")
		require.Equal(t, map[string]any{"say": map[string]any{"message": "n is 42"}}, got["output"])
		require.EqualValues(t, 1, got["workflowVersion"])
		full := b.do(t, "GET", "/api/runs/"+id+"?include=workflow", nil)
		require.Len(t, full.Body["workflow"].(map[string]any)["definition"].(map[string]any)["blocks"], 3)
		logs := b.logs(t, id)
		require.Len(t, logs, 3)
		require.Equal(t, "run "+id, logs[1]["output"].(map[string]any)["who"])
	})

	t.Run("RetriesThenFinalFailure", func(t *testing.T) {
		t.Parallel()
		b := sys.setup(t)
		b.workflow(t, "wf_r", 1, def([]string{manual,
			`{"block_id":"flaky","type":"fail","params":{"message":"flaky","fail_attempts":2}}`,
			`{"block_id":"broken","type":"fail","params":{"message":"always"}}`,
		}, edge("start", "flaky"), edge("flaky", "broken")))
		id := b.startRun(t, "wf_r", nil)
		got := b.waitStatus(t, id, "failed")
		require.Equal(t, map[string]any{"block_id": "broken", "message": "always"}, got["error"])
		logs := b.logs(t, id)
		var statuses []string
		for _, l := range logs {
			statuses = append(statuses, l["block_id"].(string)+":"+l["status"].(string))
		}
		require.Equal(t, []string{"start:succeeded", "flaky:failed", "flaky:failed", "flaky:succeeded",
			"broken:failed", "broken:failed", "broken:failed"}, statuses)
		r := b.do(t, "POST", "/api/runs/"+id+"/cancel", nil)
		require.Equal(t, http.StatusConflict, r.Status)
		require.Equal(t, "run_finished", r.Body["error"])
	})

	t.Run("BranchesSkipped", func(t *testing.T) {
		t.Parallel()
		b := sys.setup(t)
		b.workflow(t, "wf_c", 1, def([]string{manual,
			`{"block_id":"big","type":"condition","params":{"expression":"input.n > 5"}}`,
			`{"block_id":"yes","type":"log","params":{"message":"big"}}`,
			`{"block_id":"no","type":"log","params":{"message":"small"}}`,
			`{"block_id":"after_no","type":"log","params":{"message":"after small"}}`,
		}, edge("start", "big"), `{"block_id":"big","target_block_id":"yes","branch":"true"}`,
			`{"block_id":"big","target_block_id":"no","branch":"false"}`, edge("no", "after_no")))
		id := b.startRun(t, "wf_c", map[string]any{"input": map[string]any{"n": 9}})
		got := b.waitStatus(t, id, "completed")
		require.Equal(t, map[string]any{"yes": map[string]any{"message": "big"}}, got["output"])
		require.Len(t, b.logs(t, id), 3)
	})

	t.Run("IdempotencyKey", func(t *testing.T) {
		t.Parallel()
		b := sys.setup(t)
		b.workflow(t, "wf_i", 1, def([]string{manual}))
		first := b.startRun(t, "wf_i", map[string]any{"idempotencyKey": "k1"})
		require.Equal(t, first, b.startRun(t, "wf_i", nil, "Idempotency-Key", "k1"))
		require.NotEqual(t, first, b.startRun(t, "wf_i", map[string]any{"idempotencyKey": "k2"}))
		// Sent both ways, the body's key is the one used; each is held to its own rule (at most
		// 255 characters): a header that breaks it is refused even when the body has a key.
		require.Equal(t, first, b.startRun(t, "wf_i", map[string]any{"idempotencyKey": "k1"}, "Idempotency-Key", "k9"))
		for _, c := range []struct {
			body   map[string]any
			header string
			says   string
		}{
			{map[string]any{"idempotencyKey": "k1"}, strings.Repeat("k", 256), "Idempotency-Key header must be at most 255"},
			{nil, strings.Repeat("k", 256), "Idempotency-Key header must be at most 255"},
			{map[string]any{"idempotencyKey": strings.Repeat("k", 256)}, "", "idempotencyKey must be at most 255"},
		} {
			r := b.do(t, "POST", "/api/workflows/wf_i/run", c.body, "Idempotency-Key", c.header)
			require.Equal(t, http.StatusBadRequest, r.Status, r.Raw)
			require.Equal(t, "invalid_body", r.Body["error"], r.Raw)
			require.Contains(t, r.Raw, c.says)
		}
		r := b.do(t, "GET", "/api/workflows/wf_i/runs", nil)
		require.Len(t, r.Body["items"], 2)
	})

	t.Run("SleepAndSignals", func(t *testing.T) {
		t.Parallel()
		b := sys.setup(t)
		b.workflow(t, "wf_w", 1, def([]string{manual,
			`{"block_id":"nap","type":"wait","params":{"duration":"200ms"}}`,
			`{"block_id":"first","type":"wait","params":{"signal":"go"}}`,
			`{"block_id":"second","type":"wait","params":{"signal":"again","timeout":"1h"}}`,
		}, edge("start", "nap"), edge("nap", "first"), edge("first", "second")))
		id := b.startRun(t, "wf_w", nil)
		// Sent before the wait began: buffered, then consumed by the wait.
		r := b.do(t, "POST", "/api/runs/"+id+"/signals", map[string]any{"name": "go", "payload": map[string]any{"x": 1}})
		require.Equal(t, http.StatusAccepted, r.Status, r.Raw)
		require.Eventually(t, func() bool {
			got := b.do(t, "GET", "/api/runs/"+id, nil).Body
			w, _ := got["waiting"].(map[string]any)
			return got["status"] == "waiting" && w["block_id"] == "second" && w["kind"] == "signal"
		}, 15*time.Second, 10*time.Millisecond, "the run waits in second after the sleep and the buffered signal")
		r = b.do(t, "POST", "/api/runs/"+id+"/signals", map[string]any{"name": "again"})
		require.Equal(t, http.StatusAccepted, r.Status, r.Raw)
		require.Equal(t, true, r.Body["delivered"])
		got := b.waitStatus(t, id, "completed")
		require.Equal(t, map[string]any{"second": map[string]any{"signal": map[string]any{"name": "again", "payload": nil}}}, got["output"])
		logs := b.logs(t, id)
		require.Equal(t, map[string]any{"signal": map[string]any{"name": "go", "payload": map[string]any{"x": float64(1)}}}, logs[2]["output"])
		require.GreaterOrEqual(t, logs[1]["output"].(map[string]any)["slept_ms"], float64(150))
	})

	t.Run("CancelWaitingRun", func(t *testing.T) {
		t.Parallel()
		b := sys.setup(t)
		b.workflow(t, "wf_x", 1, def([]string{manual, `{"block_id":"hold","type":"wait","params":{"signal":"never"}}`}, edge("start", "hold")))
		id := b.startRun(t, "wf_x", nil)
		b.waitStatus(t, id, "waiting")
		r := b.do(t, "POST", "/api/runs/"+id+"/cancel", nil)
		require.Equal(t, http.StatusAccepted, r.Status, r.Raw)
		require.Equal(t, "cancelled", r.Body["status"])
		require.Equal(t, http.StatusAccepted, b.do(t, "POST", "/api/runs/"+id+"/cancel", nil).Status, "again 202")
		require.Equal(t, http.StatusConflict, b.do(t, "POST", "/api/runs/"+id+"/signals", map[string]any{"name": "never"}).Status)
		logs := b.logs(t, id)
		require.Equal(t, "cancelled", logs[len(logs)-1]["status"])
	})

	t.Run("RefusedDispatches", func(t *testing.T) {
		t.Parallel()
		b := sys.setup(t)
		b.workflow(t, "wf_bad", 1, def([]string{manual}), "no_trigger")
		r := b.do(t, "POST", "/api/workflows/wf_bad/run", nil)
		require.Equal(t, http.StatusBadRequest, r.Status)
		require.Equal(t, "workflow_invalid", r.Body["error"])
		require.NotEmpty(t, r.Body["validation_errors"])

		b.workflow(t, "wf_s", 1, def([]string{`{"block_id":"start","type":"trigger.manual","params":{"input_schema":{"type":"object","required":["n"],"properties":{"n":{"type":"integer"}}}}}`}))
		r = b.do(t, "POST", "/api/workflows/wf_s/run", map[string]any{"input": map[string]any{"n": "x"}})
		require.Equal(t, http.StatusBadRequest, r.Status, r.Raw)
		require.Equal(t, "invalid_body", r.Body["error"])
		b.startRun(t, "wf_s", map[string]any{"input": map[string]any{"n": 3}})

		require.Equal(t, http.StatusNotFound, b.do(t, "POST", "/api/workflows/wf_missing/run", nil).Status)
	})

	t.Run("OtherOrganizationGets404", func(t *testing.T) {
		t.Parallel()
		b := sys.setup(t)
		b.workflow(t, "wf_o", 1, def([]string{manual}))
		id := b.startRun(t, "wf_o", nil)
		other := wire.NewID(wire.Organization)
		for _, p := range []string{"/api/runs/" + id, "/api/runs/" + id + "/logs"} {
			r := b.doAs(t, other, "GET", p, nil)
			require.Equal(t, http.StatusNotFound, r.Status, p)
			require.Equal(t, "not_found", r.Body["error"])
		}
		require.Equal(t, http.StatusNotFound, b.doAs(t, other, "POST", "/api/runs/"+id+"/cancel", nil).Status)
		r := b.doAs(t, other, "GET", "/api/runs", nil)
		require.Empty(t, r.Body["items"])
	})
}

func TestDispatchWithEditorDown(t *testing.T) {
	t.Parallel()
	secret := strings.Repeat("s", 32)
	cfg := service.Config{Addr: ":0", EditorURL: "http://127.0.0.1:1", Workers: 2, Base: boot.Config{
		DatabaseURL: testkit.NewDatabase(t), InternalSecret: secret, LogLevel: slog.LevelError, Drain: time.Second,
		// Test packages share one Postgres (max_connections 100): a small pool per replica.
		DatabaseMaxConns: 10,
	}}
	app, err := service.NewApplication(context.Background(), cfg, slog.New(slog.DiscardHandler))
	require.NoError(t, err)
	t.Cleanup(app.Close)
	srv := httptest.NewServer(app.Handler())
	t.Cleanup(srv.Close)
	signer, err := internalauth.NewSigner(secret)
	require.NoError(t, err)
	b := &testBundle{sys: &system{url: srv.URL, signer: signer}, org: wire.NewID(wire.Organization)}
	// An editor outage is transient: 503 unavailable, like every peer outage, so clients retry.
	r := b.do(t, "POST", "/api/workflows/wf_any/run", nil)
	require.Equal(t, http.StatusServiceUnavailable, r.Status, r.Raw)
	require.Equal(t, "unavailable", r.Body["error"])
	require.NotEmpty(t, r.Body["message"])
	require.Empty(t, b.do(t, "GET", "/api/runs", nil).Body["items"], "nothing half-written")
}
