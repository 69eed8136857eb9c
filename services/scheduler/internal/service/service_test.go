package service_test

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"net/url"
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
	orchestratorv1 "svc.dev/proto/gen/orchestrator/v1"
	"svc.dev/proto/gen/orchestrator/v1/orchestratorv1connect"
	"svc.dev/services/scheduler/internal/app/command"
	"svc.dev/services/scheduler/internal/service"
)

// These tests drive the real composition (Postgres included) over HTTP, signing each request
// with the identity the gateway would send. The peers are real Connect servers over HTTP that
// hold their state in memory: an editor whose workflows each test sets, and an orchestrator
// that keeps one run per idempotency key, counts every StartRun and can be taken down. The
// clock is the test's, so schedules are due without waiting for real minutes; e2e tests run
// against the real peers and the real clock.

type peerEditor struct {
	editorv1connect.UnimplementedEditorServiceHandler
	mu        sync.Mutex
	workflows map[string]bool // org + "/" + id
}

func (e *peerEditor) GetWorkflow(_ context.Context, req *connect.Request[editorv1.GetWorkflowRequest]) (*connect.Response[editorv1.GetWorkflowResponse], error) {
	e.mu.Lock()
	defer e.mu.Unlock()
	if !e.workflows[req.Msg.GetOrganizationId()+"/"+req.Msg.GetId()] {
		return connect.NewResponse(&editorv1.GetWorkflowResponse{Result: &editorv1.GetWorkflowResponse_NotFound{NotFound: &editorv1.NotFound{}}}), nil
	}
	return connect.NewResponse(&editorv1.GetWorkflowResponse{Result: &editorv1.GetWorkflowResponse_Workflow{Workflow: &editorv1.Workflow{
		Id: req.Msg.GetId(), OrganizationId: req.Msg.GetOrganizationId(), Version: 1, DefinitionJson: `{"blocks":[],"edges":[]}`,
	}}}), nil
}

type startCall struct {
	org, workflow, key, kind, trigger, input string
}

type peerOrchestrator struct {
	orchestratorv1connect.UnimplementedOrchestratorServiceHandler
	editor *peerEditor
	down   atomic.Bool
	// old makes it an orchestrator that does not serve StartRuns yet.
	old     atomic.Bool
	mu      sync.Mutex
	runs    map[string]string // org + "/" + key → run id
	calls   []startCall       // every start, alone or in a batch
	batches []int             // the size of each StartRuns
	singles int               // how many StartRun
}

func (o *peerOrchestrator) StartRun(_ context.Context, req *connect.Request[orchestratorv1.StartRunRequest]) (*connect.Response[orchestratorv1.StartRunResponse], error) {
	if o.down.Load() {
		return nil, connect.NewError(connect.CodeUnavailable, fmt.Errorf("orchestrator down"))
	}
	o.mu.Lock()
	defer o.mu.Unlock()
	o.singles++
	return connect.NewResponse(o.start(req.Msg)), nil
}

func (o *peerOrchestrator) StartRuns(_ context.Context, req *connect.Request[orchestratorv1.StartRunsRequest]) (*connect.Response[orchestratorv1.StartRunsResponse], error) {
	if o.old.Load() {
		return nil, connect.NewError(connect.CodeUnimplemented, fmt.Errorf("no StartRuns here"))
	}
	if o.down.Load() {
		return nil, connect.NewError(connect.CodeUnavailable, fmt.Errorf("orchestrator down"))
	}
	if len(req.Msg.GetRequests()) > 500 {
		return nil, connect.NewError(connect.CodeInvalidArgument, fmt.Errorf("too many"))
	}
	o.mu.Lock()
	defer o.mu.Unlock()
	o.batches = append(o.batches, len(req.Msg.GetRequests()))
	out := &orchestratorv1.StartRunsResponse{}
	for _, m := range req.Msg.GetRequests() {
		out.Responses = append(out.Responses, o.start(m))
	}
	return connect.NewResponse(out), nil
}

// start is one start, under o.mu.
func (o *peerOrchestrator) start(m *orchestratorv1.StartRunRequest) *orchestratorv1.StartRunResponse {
	o.calls = append(o.calls, startCall{org: m.GetOrganizationId(), workflow: m.GetWorkflowId(), key: m.GetIdempotencyKey(),
		kind: m.GetTriggerKind(), trigger: m.GetTriggerJson(), input: m.GetInputJson()})
	o.editor.mu.Lock()
	exists := o.editor.workflows[m.GetOrganizationId()+"/"+m.GetWorkflowId()]
	o.editor.mu.Unlock()
	if !exists {
		return &orchestratorv1.StartRunResponse{Result: &orchestratorv1.StartRunResponse_NotFound{NotFound: &orchestratorv1.NotFound{}}}
	}
	k := m.GetOrganizationId() + "/" + m.GetIdempotencyKey()
	id, dedup := o.runs[k]
	if !dedup {
		id = wire.NewID(wire.Run)
		o.runs[k] = id
	}
	return &orchestratorv1.StartRunResponse{Result: &orchestratorv1.StartRunResponse_Started{
		Started: &orchestratorv1.Started{RunId: id, Deduplicated: dedup}}}
}

// counts is how many StartRuns and StartRun calls the orchestrator answered, and the largest
// batch.
func (o *peerOrchestrator) counts() (batches, largest, singles int) {
	o.mu.Lock()
	defer o.mu.Unlock()
	for _, n := range o.batches {
		largest = max(largest, n)
	}
	return len(o.batches), largest, o.singles
}

func (o *peerOrchestrator) snapshot() (map[string]string, []startCall) {
	o.mu.Lock()
	defer o.mu.Unlock()
	runs := map[string]string{}
	for k, v := range o.runs {
		runs[k] = v
	}
	return runs, append([]startCall(nil), o.calls...)
}

// clock is the service's clock, moved by the test.
type clock struct {
	mu  sync.Mutex
	now time.Time
}

func (c *clock) Now() time.Time { c.mu.Lock(); defer c.mu.Unlock(); return c.now }

func (c *clock) Set(t time.Time) { c.mu.Lock(); defer c.mu.Unlock(); c.now = t }

type system struct {
	url          string
	signer       internalauth.Signer
	editor       *peerEditor
	orchestrator *peerOrchestrator
	clock        *clock
	app          *service.Application
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

func start(t *testing.T, mod func(*service.Config)) *system {
	t.Helper()
	secret := strings.Repeat("s", 32)
	signer, err := internalauth.NewSigner(secret)
	require.NoError(t, err)
	ed := &peerEditor{workflows: map[string]bool{}}
	orch := &peerOrchestrator{editor: ed, runs: map[string]string{}}
	mux := http.NewServeMux()
	p, h := editorv1connect.NewEditorServiceHandler(ed)
	mux.Handle(p, signer.Require(time.Now)(h))
	p, h = orchestratorv1connect.NewOrchestratorServiceHandler(orch)
	mux.Handle(p, signer.Require(time.Now)(h))
	peers := httptest.NewServer(mux)
	t.Cleanup(peers.Close)

	clk := &clock{now: time.Date(2026, 11, 22, 10, 0, 30, 0, time.UTC)}
	cfg := service.Config{Addr: ":0", EditorURL: peers.URL, OrchestratorURL: peers.URL, Now: clk.Now, Base: boot.Config{
		DatabaseURL: testkit.NewDatabase(t), InternalSecret: secret, LogLevel: slog.LevelError, Drain: time.Second,
	}}
	if mod != nil {
		mod(&cfg)
	}
	app, err := service.NewApplication(context.Background(), cfg, slog.New(slog.DiscardHandler))
	require.NoError(t, err)
	t.Cleanup(app.Close)
	srv := httptest.NewServer(app.Handler())
	t.Cleanup(srv.Close)
	return &system{url: srv.URL, signer: signer, editor: ed, orchestrator: orch, clock: clk, app: app}
}

func (s *system) setup(t *testing.T) *testBundle {
	t.Helper()
	return &testBundle{sys: s, org: wire.NewID(wire.Organization)}
}

// workflow makes a workflow of the bundle's organization exist in the editor.
func (b *testBundle) workflow(t *testing.T) string {
	t.Helper()
	id := wire.NewID(wire.Workflow)
	b.sys.editor.mu.Lock()
	b.sys.editor.workflows[b.org+"/"+id] = true
	b.sys.editor.mu.Unlock()
	return id
}

func (b *testBundle) deleteWorkflow(id string) {
	b.sys.editor.mu.Lock()
	delete(b.sys.editor.workflows, b.org+"/"+id)
	b.sys.editor.mu.Unlock()
}

func (b *testBundle) do(t *testing.T, method, path string, body any) response {
	t.Helper()
	return b.doAs(t, b.org, method, path, body)
}

func (b *testBundle) doAs(t *testing.T, org, method, path string, body any) response {
	t.Helper()
	var rd io.Reader
	if body != nil {
		raw, err := json.Marshal(body)
		require.NoError(t, err)
		rd = bytes.NewReader(raw)
	}
	ctx := internalauth.WithIdentity(context.Background(), internalauth.Identity{UserID: "usr_test", OrganizationID: org, AuthMode: internalauth.ModeSession})
	req, err := http.NewRequestWithContext(ctx, method, b.sys.url+path, rd)
	require.NoError(t, err)
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

func (b *testBundle) create(t *testing.T, body map[string]any) map[string]any {
	t.Helper()
	r := b.do(t, "POST", "/api/schedules", body)
	require.Equal(t, http.StatusCreated, r.Status, r.Raw)
	return r.Body
}

func (b *testBundle) tick(t *testing.T) response {
	t.Helper()
	r := b.do(t, "POST", "/api/admin/tick", nil)
	require.Equal(t, http.StatusOK, r.Status, r.Raw)
	return r
}

func requireError(t *testing.T, r response, status int, code string) {
	t.Helper()
	require.Equal(t, status, r.Status, r.Raw)
	require.Equal(t, code, r.Body["error"], r.Raw)
}

func items(t *testing.T, v any) []map[string]any {
	t.Helper()
	arr, ok := v.([]any)
	require.True(t, ok, "want an array, got %T", v)
	out := make([]map[string]any, len(arr))
	for i, it := range arr {
		out[i] = it.(map[string]any)
	}
	return out
}

func TestSchedules(t *testing.T) {
	t.Parallel()
	sys := start(t, nil)

	t.Run("CreateGetUpdateDelete", func(t *testing.T) {
		t.Parallel()
		b := sys.setup(t)
		wf := b.workflow(t)
		got := b.create(t, map[string]any{"workflowId": wf, "cron": "30 2 * * *", "timezone": "America/New_York", "input": map[string]any{"n": 1}})
		id := got["id"].(string)
		require.Regexp(t, `^sch_`, id)
		require.Equal(t, wf, got["workflowId"])
		require.Equal(t, "30 2 * * *", got["cron"])
		require.Equal(t, "America/New_York", got["timezone"])
		require.Equal(t, map[string]any{"n": float64(1)}, got["input"])
		require.Equal(t, true, got["enabled"])
		require.Nil(t, got["lastFiredAt"])
		// Created 2026-11-22 10:00:30 UTC = 05:00:30 EST: the next 02:30 EST is tomorrow 07:30 UTC.
		require.Equal(t, "2026-11-23T07:30:00.000Z", got["nextFireAt"])
		require.Equal(t, "2026-11-22T10:00:30.000Z", got["createdAt"])

		r := b.do(t, "GET", "/api/schedules/"+id, nil)
		require.Equal(t, http.StatusOK, r.Status, r.Raw)
		require.Equal(t, got, r.Body)

		r = b.do(t, "PATCH", "/api/schedules/"+id, map[string]any{"cron": "@hourly", "timezone": "UTC", "input": nil})
		require.Equal(t, http.StatusOK, r.Status, r.Raw)
		require.Equal(t, "@hourly", r.Body["cron"])
		require.Nil(t, r.Body["input"])
		require.Equal(t, "2026-11-22T11:00:00.000Z", r.Body["nextFireAt"])

		r = b.do(t, "PATCH", "/api/schedules/"+id, map[string]any{"enabled": false})
		require.Equal(t, http.StatusOK, r.Status, r.Raw)
		require.Equal(t, false, r.Body["enabled"])
		require.Nil(t, r.Body["nextFireAt"], "a disabled schedule has no next fire")

		requireError(t, b.do(t, "PATCH", "/api/schedules/"+id, map[string]any{"cron": "61 * * * *"}), 400, "invalid_cron")
		requireError(t, b.do(t, "PATCH", "/api/schedules/"+id, map[string]any{"workflowId": wire.NewID(wire.Workflow)}), 404, "workflow_not_found")
		requireError(t, b.do(t, "PATCH", "/api/schedules/"+id, map[string]any{"bogus": 1}), 400, "invalid_body")

		r = b.do(t, "DELETE", "/api/schedules/"+id, nil)
		require.Equal(t, http.StatusNoContent, r.Status, r.Raw)
		requireError(t, b.do(t, "GET", "/api/schedules/"+id, nil), 404, "not_found")
		requireError(t, b.do(t, "DELETE", "/api/schedules/"+id, nil), 404, "not_found")
	})

	t.Run("RefusesBadInput", func(t *testing.T) {
		t.Parallel()
		b := sys.setup(t)
		wf := b.workflow(t)
		for _, tc := range []struct {
			body map[string]any
			code string
			says string
		}{
			{map[string]any{"workflowId": wf, "cron": "* * *"}, "invalid_cron", "3 fields, want 5"},
			{map[string]any{"workflowId": wf, "cron": "0 25 * * *"}, "invalid_cron", "hour"},
			{map[string]any{"workflowId": wf, "cron": "@often"}, "invalid_cron", "descriptor"},
			{map[string]any{"workflowId": wf, "cron": "* * * * *", "timezone": "Nowhere/City"}, "invalid_cron", "IANA"},
			{map[string]any{"workflowId": wf}, "invalid_body", "cron is required"},
			{map[string]any{"cron": "* * * * *"}, "invalid_body", "workflowId is required"},
			{map[string]any{"workflowId": wf, "cron": 5}, "invalid_body", ""},
		} {
			r := b.do(t, "POST", "/api/schedules", tc.body)
			requireError(t, r, 400, tc.code)
			require.Contains(t, r.Body["message"], tc.says, r.Raw)
		}
		// The JSON boundary (issue 12, defect 1): an input no run could hold would poison
		// every fire; it is refused with a pointer, on create and on update.
		for _, tc := range []struct{ body, pointer string }{
			{`{"workflowId":"` + wf + `","cron":"@daily","input":{"n":1e309}}`, "/input/n"},
			{`{"workflowId":"` + wf + `","cron":"@daily","input":{"n":-1e400}}`, "/input/n"},
			{`{"workflowId":"` + wf + `","cron":"@daily","input":[123456789012345678901234567890]}`, "/input/0"},
			{`{"workflowId":"` + wf + `","cron":"@daily","input":{"a":1,"a":2}}`, "/input/a"},
		} {
			r := b.do(t, "POST", "/api/schedules", json.RawMessage(tc.body))
			requireError(t, r, 400, "invalid_body")
			require.Equal(t, tc.pointer, r.Body["issues"].([]any)[0].(map[string]any)["path"], r.Raw)
		}
		made := b.create(t, map[string]any{"workflowId": wf, "cron": "@daily"})
		r := b.do(t, "PATCH", "/api/schedules/"+made["id"].(string), json.RawMessage(`{"input":{"n":1e309}}`))
		requireError(t, r, 400, "invalid_body")
		requireError(t, b.do(t, "POST", "/api/schedules", map[string]any{"workflowId": wire.NewID(wire.Workflow), "cron": "@daily"}), 404, "workflow_not_found")
		requireError(t, b.do(t, "POST", "/api/schedules", map[string]any{"workflowId": "wf_nope", "cron": "@daily"}), 404, "workflow_not_found")
		// The editor is asked about the caller's organization: another's workflow is not found.
		other := sys.setup(t)
		requireError(t, other.do(t, "POST", "/api/schedules", map[string]any{"workflowId": wf, "cron": "@daily"}), 404, "workflow_not_found")
		requireError(t, b.do(t, "GET", "/api/schedules/sch_nope", nil), 404, "not_found")
	})

	t.Run("ListPagesAndFiltersAndIsolatesOrganizations", func(t *testing.T) {
		t.Parallel()
		b := sys.setup(t)
		wf1, wf2 := b.workflow(t), b.workflow(t)
		var ids []string
		for i := range 5 {
			wf := wf1
			if i%2 == 1 {
				wf = wf2
			}
			ids = append(ids, b.create(t, map[string]any{"workflowId": wf, "cron": "@daily"})["id"].(string))
		}
		var seen []string
		cursor := ""
		for page := 0; ; page++ {
			path := "/api/schedules?limit=2"
			if cursor != "" {
				path += "&after=" + cursor
			}
			r := b.do(t, "GET", path, nil)
			require.Equal(t, http.StatusOK, r.Status, r.Raw)
			for _, it := range items(t, r.Body["items"]) {
				seen = append(seen, it["id"].(string))
			}
			if r.Body["nextCursor"] == nil {
				break
			}
			cursor = r.Body["nextCursor"].(string)
			require.Less(t, page, 5)
		}
		require.Equal(t, []string{ids[4], ids[3], ids[2], ids[1], ids[0]}, seen, "newest first, each once")

		r := b.do(t, "GET", "/api/schedules?workflowId="+wf2, nil)
		require.Equal(t, http.StatusOK, r.Status, r.Raw)
		require.Len(t, items(t, r.Body["items"]), 2)
		require.Nil(t, r.Body["nextCursor"])
		// A filter naming no workflow of the organization is not found, never an empty list;
		// the organization's own workflow without schedules is an empty list.
		requireError(t, b.do(t, "GET", "/api/schedules?workflowId=nonsense", nil), 404, "not_found")
		requireError(t, b.do(t, "GET", "/api/schedules?workflowId=", nil), 404, "not_found")
		requireError(t, b.do(t, "GET", "/api/schedules?workflowId="+wire.NewID(wire.Workflow), nil), 404, "not_found")
		requireError(t, sys.setup(t).do(t, "GET", "/api/schedules?workflowId="+wf2, nil), 404, "not_found")
		r = b.do(t, "GET", "/api/schedules?workflowId="+b.workflow(t), nil)
		require.Equal(t, http.StatusOK, r.Status, r.Raw)
		require.Empty(t, items(t, r.Body["items"]))

		requireError(t, b.do(t, "GET", "/api/schedules?limit=0", nil), 400, "invalid_query")
		requireError(t, b.do(t, "GET", "/api/schedules?limit=501", nil), 400, "invalid_query")
		requireError(t, b.do(t, "GET", "/api/schedules?after=bogus", nil), 400, "invalid_query")

		other := sys.setup(t)
		r = other.do(t, "GET", "/api/schedules", nil)
		require.Equal(t, http.StatusOK, r.Status, r.Raw)
		require.Empty(t, items(t, r.Body["items"]))
		requireError(t, other.do(t, "GET", "/api/schedules/"+ids[0], nil), 404, "not_found")
		requireError(t, other.do(t, "PATCH", "/api/schedules/"+ids[0], map[string]any{"enabled": false}), 404, "not_found")
		requireError(t, other.do(t, "DELETE", "/api/schedules/"+ids[0], nil), 404, "not_found")
	})

	t.Run("PreviewListsTheNextFireTimes", func(t *testing.T) {
		t.Parallel()
		b := sys.setup(t)
		now := sys.clock.Now() // 2026-11-22T10:00:30Z
		require.Equal(t, time.Date(2026, 11, 22, 10, 0, 30, 0, time.UTC), now.UTC())
		r := b.do(t, "GET", "/api/schedules/preview?cron="+url.QueryEscape("30 2 * * *")+"&timezone=America/New_York", nil)
		require.Equal(t, http.StatusOK, r.Status, r.Raw)
		require.Equal(t, []any{
			"2026-11-23T07:30:00.000Z", "2026-11-24T07:30:00.000Z", "2026-11-25T07:30:00.000Z",
			"2026-11-26T07:30:00.000Z", "2026-11-27T07:30:00.000Z",
		}, r.Body["next"])
		// The fire times a schedule of the same cron gets: its nextFireAt is the first.
		made := b.create(t, map[string]any{"workflowId": b.workflow(t), "cron": "*/20 * * * *"})
		r = b.do(t, "GET", "/api/schedules/preview?cron="+url.QueryEscape("*/20 * * * *"), nil)
		require.Equal(t, http.StatusOK, r.Status, r.Raw)
		require.Equal(t, made["nextFireAt"], r.Body["next"].([]any)[0], "UTC by default")
		require.Len(t, r.Body["next"], 5)
		// Nothing was stored: the list holds the one schedule made above.
		require.Len(t, b.do(t, "GET", "/api/schedules", nil).Body["items"], 1)

		for _, tc := range []struct{ query, says string }{
			{"", "cron is empty"},
			{"?cron=", "cron is empty"},
			{"?cron=" + url.QueryEscape("61 * * * *"), `field 1 (minute) is "61"`},
			{"?cron=" + url.QueryEscape("* * * *"), "4 fields, want 5"},
			{"?cron=%40daily&timezone=Mars%2FOlympus", `timezone "Mars/Olympus"`},
		} {
			r := b.do(t, "GET", "/api/schedules/preview"+tc.query, nil)
			requireError(t, r, http.StatusBadRequest, "invalid_cron")
			require.Contains(t, r.Body["message"], tc.says, tc.query)
		}
		// Only GET: the other methods on the path are a schedule id that cannot be.
		requireError(t, b.do(t, "DELETE", "/api/schedules/preview", nil), http.StatusNotFound, "not_found")
	})

	t.Run("NothingAClientSendsIsA5xx", func(t *testing.T) {
		t.Parallel()
		b := sys.setup(t)
		wf := b.workflow(t)
		id := b.create(t, map[string]any{"workflowId": wf, "cron": "0 0 1 1 *"})["id"].(string)
		for _, tc := range []struct{ method, path, body string }{
			{"POST", "/api/schedules", ``},
			{"POST", "/api/schedules", `[]`},
			{"POST", "/api/schedules", `{"workflowId": 1, "cron": "@daily"}`},
			{"POST", "/api/schedules", `{"workflowId": "` + wf + `", "cron": "@daily", "timezone": "\u0000"}`},
			{"POST", "/api/schedules", `{"workflowId": "` + wf + `", "cron": "` + strings.Repeat("* ", 300) + `"}`},
			{"POST", "/api/schedules", `{"workflowId": "` + wf + `", "cron": "*/0 */0 */0 */0 */0"}`},
			{"POST", "/api/schedules", `{"workflowId": "` + wf + `", "cron": "@daily", "enabled": "yes"}`},
			{"PATCH", "/api/schedules/" + id, `{"cron": null, "timezone": "Europe/Atlantis"}`},
			{"PATCH", "/api/schedules/" + id, `{"input": {"a": [1, 2, {"b": null}]}}`},
			{"PATCH", "/api/schedules/" + id, `not json`},
			{"GET", "/api/schedules?limit=-1&after=%ff", ``},
			{"GET", "/api/schedules/sch_01" + strings.Repeat("z", 24), ``},
			{"POST", "/api/admin/tick", `[1]`},
			{"POST", "/api/admin/tick", `{"now": "2030-01-01T00:00:00Z"}`},
		} {
			ctx := internalauth.WithIdentity(context.Background(), internalauth.Identity{UserID: "usr_test", OrganizationID: b.org, AuthMode: internalauth.ModeSession})
			req, err := http.NewRequestWithContext(ctx, tc.method, sys.url+tc.path, strings.NewReader(tc.body))
			require.NoError(t, err)
			resp, err := (&http.Client{Transport: internalauth.Transport{Signer: sys.signer, Base: http.DefaultTransport, Now: time.Now}}).Do(req)
			require.NoError(t, err)
			raw, _ := io.ReadAll(resp.Body)
			resp.Body.Close()
			require.Less(t, resp.StatusCode, 500, "%s %s %s: %s", tc.method, tc.path, tc.body, raw)
		}
	})

	t.Run("UnsignedIsUnauthorized", func(t *testing.T) {
		t.Parallel()
		resp, err := http.Post(sys.url+"/api/admin/tick", "application/json", nil)
		require.NoError(t, err)
		resp.Body.Close()
		require.Equal(t, http.StatusUnauthorized, resp.StatusCode)
	})
}

// TestTick: each test has its own system, because a tick fires every organization's schedules.
func TestTick(t *testing.T) {
	t.Parallel()

	t.Run("ParallelTicksFireEachScheduleOnce", func(t *testing.T) {
		t.Parallel()
		sys := start(t, func(c *service.Config) {
			// Small batches: many transactions of many ticks meet on the same rows.
			c.TickSizes = command.TickConfig{ClaimBatch: 50, ClaimWorkers: 3, DispatchBatch: 20, DispatchWorkers: 3, CallBatch: 7, Concurrency: 2}
		})
		b := sys.setup(t)
		wf := b.workflow(t)
		const n = 1000
		ids := map[string]bool{}
		var mu sync.Mutex
		var wg sync.WaitGroup
		for w := range 8 {
			wg.Go(func() {
				for i := w; i < n; i += 8 {
					s := b.create(t, map[string]any{"workflowId": wf, "cron": "* * * * *", "input": map[string]any{"i": i}})
					mu.Lock()
					ids[s["id"].(string)] = true
					mu.Unlock()
				}
			})
		}
		wg.Wait()
		require.Len(t, ids, n)
		// Nothing is due yet: the first fire is 10:01:00.
		require.EqualValues(t, 0, b.tick(t).Body["claimed"])

		// 10:03:10: three fire times were missed; they coalesce into one cutoff, 10:03:00.
		sys.clock.Set(time.Date(2026, 11, 22, 10, 3, 10, 0, time.UTC))
		results := make([]response, 8)
		for i := range 8 {
			wg.Go(func() { results[i] = b.tick(t) })
		}
		wg.Wait()
		claimed := 0
		fired := map[string]string{}
		for _, r := range results {
			claimed += int(r.Body["claimed"].(float64))
			require.Empty(t, r.Body["failed"], r.Raw)
			for _, f := range items(t, r.Body["fired"]) {
				sid := f["scheduleId"].(string)
				require.NotContains(t, fired, sid, "fired twice")
				require.Equal(t, "2026-11-22T10:03:00.000Z", f["cutoff"])
				fired[sid] = f["runId"].(string)
			}
		}
		require.Equal(t, n, claimed)
		require.Len(t, fired, n)

		runs, calls := sys.orchestrator.snapshot()
		require.Len(t, runs, n, "one run per (schedule, cutoff)")
		require.Len(t, calls, n, "and one start each: no fire was dispatched twice")
		batches, largest, singles := sys.orchestrator.counts()
		require.Zero(t, singles, "fires go in batches")
		require.LessOrEqual(t, largest, 7, "a call carries at most CallBatch fires")
		require.GreaterOrEqual(t, batches, n/7)
		for _, c := range calls {
			require.True(t, ids[strings.TrimSuffix(strings.TrimPrefix(c.key, "schedule:"), ":2026-11-22T10:03:00.000Z")], c.key)
			require.Equal(t, b.org, c.org)
			require.Equal(t, wf, c.workflow)
			require.Equal(t, "schedule", c.kind)
			var trig map[string]any
			require.NoError(t, json.Unmarshal([]byte(c.trigger), &trig))
			require.Equal(t, map[string]any{"scheduleId": strings.Split(c.key, ":")[1], "cutoff": "2026-11-22T10:03:00.000Z"}, trig)
			require.Regexp(t, `^\{"i": ?\d+\}$`, c.input)
		}
		for id := range ids {
			require.Equal(t, runs[b.org+"/schedule:"+id+":2026-11-22T10:03:00.000Z"], fired[id])
		}
		s := b.do(t, "GET", "/api/schedules/"+calls[0].key[len("schedule:"):len("schedule:")+30], nil)
		require.Equal(t, http.StatusOK, s.Status, s.Raw)
		require.Equal(t, "2026-11-22T10:03:00.000Z", s.Body["lastFiredAt"], "lastFiredAt is the cutoff, not the claim's wall time")
		require.Equal(t, "2026-11-22T10:04:00.000Z", s.Body["nextFireAt"])

		// Ticking again at the same time fires nothing more.
		for range 3 {
			r := b.tick(t)
			require.EqualValues(t, 0, r.Body["claimed"])
			require.Empty(t, r.Body["fired"])
		}
		_, calls = sys.orchestrator.snapshot()
		require.Len(t, calls, n)

		// Another organization's tick fires the schedules too, but its answer neither lists nor
		// counts them (issue 21: claimed told any caller how many schedules every organization
		// had due).
		sys.clock.Set(time.Date(2026, 11, 22, 10, 4, 0, 0, time.UTC))
		other := sys.setup(t)
		own := other.create(t, map[string]any{"workflowId": other.workflow(t), "cron": "* * * * *"})["id"].(string)
		sys.clock.Set(time.Date(2026, 11, 22, 10, 5, 0, 0, time.UTC))
		r := other.tick(t)
		require.EqualValues(t, 1, r.Body["claimed"], "its own schedule only: %s", r.Raw)
		fired = map[string]string{}
		for _, f := range items(t, r.Body["fired"]) {
			fired[f["scheduleId"].(string)] = f["runId"].(string)
		}
		require.Len(t, fired, 1)
		require.Contains(t, fired, own)
		runs, _ = sys.orchestrator.snapshot()
		require.Len(t, runs, 2*n+1, "everything due was fired all the same")
	})

	t.Run("OrchestratorOutageFiresOnceOnALaterTick", func(t *testing.T) {
		t.Parallel()
		sys := start(t, nil)
		b := sys.setup(t)
		wf := b.workflow(t)
		var ids []string
		for range 5 {
			ids = append(ids, b.create(t, map[string]any{"workflowId": wf, "cron": "@hourly"})["id"].(string))
		}
		sys.orchestrator.down.Store(true)
		sys.clock.Set(time.Date(2026, 11, 22, 11, 0, 1, 0, time.UTC))
		r := b.tick(t)
		require.EqualValues(t, 5, r.Body["claimed"])
		require.Empty(t, r.Body["fired"])
		failed := items(t, r.Body["failed"])
		require.Len(t, failed, 5)
		for _, f := range failed {
			require.Equal(t, "dispatch_failed", f["error"])
		}
		// The claim stands: lastFiredAt moved even though no run started.
		require.Equal(t, "2026-11-22T11:00:00.000Z", b.do(t, "GET", "/api/schedules/"+ids[0], nil).Body["lastFiredAt"])

		// Back up, but the retry is not due yet (1 s after the failure): nothing happens.
		sys.orchestrator.down.Store(false)
		r = b.tick(t)
		require.EqualValues(t, 0, r.Body["claimed"])
		require.Empty(t, r.Body["fired"])
		require.Empty(t, r.Body["failed"])

		// Later ticks retry the outbox until every fire went through (the client's breaker may
		// still be open for a few seconds after the outage: those attempts fail fast and wait).
		at := time.Date(2026, 11, 22, 11, 0, 1, 0, time.UTC)
		fired := map[string]bool{}
		deadline := time.Now().Add(20 * time.Second)
		for len(fired) < 5 {
			require.True(t, time.Now().Before(deadline), "fires not dispatched after the outage: %v", fired)
			at = at.Add(31 * time.Second) // past any retry delay
			sys.clock.Set(at)
			r = b.tick(t)
			require.EqualValues(t, 0, r.Body["claimed"], "the outbox is retried; no new cutoff is claimed before 12:00")
			for _, f := range items(t, r.Body["fired"]) {
				require.False(t, fired[f["scheduleId"].(string)], "dispatched twice")
				require.Equal(t, "2026-11-22T11:00:00.000Z", f["cutoff"])
				fired[f["scheduleId"].(string)] = true
			}
			if len(fired) < 5 {
				time.Sleep(100 * time.Millisecond) // let the breaker's real-time window pass
			}
		}
		runs, _ := sys.orchestrator.snapshot()
		require.Len(t, runs, 5)
		for _, id := range ids {
			require.Contains(t, runs, b.org+"/schedule:"+id+":2026-11-22T11:00:00.000Z")
		}
		r = b.tick(t)
		require.Empty(t, r.Body["fired"], "dispatched fires are out of the outbox")
	})

	t.Run("OrchestratorWithoutStartRunsGetsOneStartRunPerFire", func(t *testing.T) {
		t.Parallel()
		sys := start(t, nil)
		sys.orchestrator.old.Store(true)
		b := sys.setup(t)
		wf := b.workflow(t)
		gone := b.workflow(t)
		var ids []string
		for range 4 {
			ids = append(ids, b.create(t, map[string]any{"workflowId": wf, "cron": "@hourly"})["id"].(string))
		}
		orphan := b.create(t, map[string]any{"workflowId": gone, "cron": "@hourly"})["id"].(string)
		b.deleteWorkflow(gone)
		sys.clock.Set(time.Date(2026, 11, 22, 11, 0, 0, 0, time.UTC))
		r := b.tick(t)
		require.EqualValues(t, 5, r.Body["claimed"])
		require.Len(t, items(t, r.Body["fired"]), 4, r.Raw)
		require.Equal(t, []map[string]any{{"scheduleId": orphan, "cutoff": "2026-11-22T11:00:00.000Z", "error": "workflow_not_found"}}, items(t, r.Body["failed"]))
		runs, _ := sys.orchestrator.snapshot()
		for _, id := range ids {
			require.Contains(t, runs, b.org+"/schedule:"+id+":2026-11-22T11:00:00.000Z")
		}
		batches, _, singles := sys.orchestrator.counts()
		require.Zero(t, batches)
		require.Equal(t, 5, singles)
		require.Equal(t, false, b.do(t, "GET", "/api/schedules/"+orphan, nil).Body["enabled"])
	})

	t.Run("DeletedWorkflowFailsTheFireAndDisablesTheSchedule", func(t *testing.T) {
		t.Parallel()
		sys := start(t, nil)
		b := sys.setup(t)
		wf := b.workflow(t)
		id := b.create(t, map[string]any{"workflowId": wf, "cron": "@hourly"})["id"].(string)
		b.deleteWorkflow(wf)
		sys.clock.Set(time.Date(2026, 11, 22, 11, 0, 0, 0, time.UTC))
		r := b.tick(t)
		require.Equal(t, []map[string]any{{"scheduleId": id, "cutoff": "2026-11-22T11:00:00.000Z", "error": "workflow_not_found"}}, items(t, r.Body["failed"]))
		s := b.do(t, "GET", "/api/schedules/"+id, nil)
		require.Equal(t, false, s.Body["enabled"], s.Raw)
		require.Nil(t, s.Body["nextFireAt"])
		sys.clock.Set(time.Date(2026, 11, 22, 14, 0, 0, 0, time.UTC))
		r = b.tick(t)
		require.EqualValues(t, 0, r.Body["claimed"], "a disabled schedule is never due")
		require.Empty(t, r.Body["failed"], "a final failure is not retried")

		// Pointed at a workflow that exists and enabled again, it fires at once: the fires it
		// missed while disabled coalesce into one cutoff.
		wf2 := b.workflow(t)
		p := b.do(t, "PATCH", "/api/schedules/"+id, map[string]any{"workflowId": wf2, "enabled": true})
		require.Equal(t, http.StatusOK, p.Status, p.Raw)
		require.Equal(t, "2026-11-22T12:00:00.000Z", p.Body["nextFireAt"])
		r = b.tick(t)
		require.Equal(t, "2026-11-22T14:00:00.000Z", items(t, r.Body["fired"])[0]["cutoff"], r.Raw)
		runs, _ := sys.orchestrator.snapshot()
		require.Contains(t, runs, b.org+"/schedule:"+id+":2026-11-22T14:00:00.000Z")
	})

	t.Run("BuiltInTicker", func(t *testing.T) {
		t.Parallel()
		sys := start(t, func(c *service.Config) { c.Tick = 20 * time.Millisecond })
		ctx, cancel := context.WithCancel(context.Background())
		done := make(chan struct{})
		go func() { defer close(done); sys.app.RunTicker(ctx) }()
		t.Cleanup(func() { cancel(); <-done })
		b := sys.setup(t)
		wf := b.workflow(t)
		id := b.create(t, map[string]any{"workflowId": wf, "cron": "* * * * *"})["id"].(string)
		sys.clock.Set(time.Date(2026, 11, 22, 10, 1, 0, 0, time.UTC))
		require.Eventually(t, func() bool {
			runs, _ := sys.orchestrator.snapshot()
			return runs[b.org+"/schedule:"+id+":2026-11-22T10:01:00.000Z"] != ""
		}, 10*time.Second, 10*time.Millisecond)
	})
}
