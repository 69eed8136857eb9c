package httpapi_test

import (
	"context"
	"encoding/json"
	"errors"
	"net/http"
	"net/http/httptest"
	"net/url"
	"sort"
	"strings"
	"testing"
	"unicode/utf8"

	"github.com/stretchr/testify/require"

	"svc.dev/libs/internalauth"
	"svc.dev/libs/wire"
	"svc.dev/services/run-orchestrator/internal/app"
	"svc.dev/services/run-orchestrator/internal/app/port"
	"svc.dev/services/run-orchestrator/internal/app/query"
	"svc.dev/services/run-orchestrator/internal/domain/run"
	"svc.dev/services/run-orchestrator/internal/ports/httpapi"
)

// memReader is the read side over a slice of runs and attempts, scoped like the real one.
type memReader struct {
	runs     []run.Record
	attempts map[string][]run.Attempt
}

func (m *memReader) Get(_ context.Context, org, id string) (run.Record, error) {
	for _, r := range m.runs {
		if r.ID == id && r.OrganizationID == org {
			return r, nil
		}
	}
	return run.Record{}, run.ErrNotFound
}

// WaitingForWorker finds no job waiting: this reader has no queue.
func (m *memReader) WaitingForWorker(ctx context.Context, org, id string) (*run.Queued, error) {
	if _, err := m.Get(ctx, org, id); err != nil {
		return nil, err
	}
	return nil, nil
}

// List and Logs page as the Postgres reader does: at most the limit, no more than fit in
// maxBytes (the JSON members' length and a fixed overhead per item), at least one.
func (m *memReader) List(_ context.Context, org string, f run.ListFilter, maxBytes int64) (port.RunPage, error) {
	if strings.ContainsRune(f.WorkflowID, 0) || !utf8.ValidString(f.WorkflowID) {
		return port.RunPage{}, errors.New("ERROR: invalid byte sequence for encoding \"UTF8\"") // as Postgres answers
	}
	var out []run.Record
	for _, r := range m.runs {
		if r.OrganizationID == org && (f.WorkflowID == "" || r.WorkflowID == f.WorkflowID) &&
			(f.Status == "" || r.Status == f.Status) && (f.After == "" || r.ID < f.After) {
			out = append(out, r)
		}
	}
	sort.Slice(out, func(i, j int) bool { return out[i].ID > out[j].ID })
	var total int64
	for i, r := range out {
		total += int64(len(r.Input)+len(r.Output)+len(r.Error)+len(r.Trigger)) + 512
		if i == f.Limit || (i > 0 && total > maxBytes) {
			return port.RunPage{Runs: out[:i], More: true}, nil
		}
	}
	return port.RunPage{Runs: out}, nil
}

func (m *memReader) Logs(ctx context.Context, org, runID string, after int64, limit int, maxBytes int64) ([]run.Attempt, error) {
	if _, err := m.Get(ctx, org, runID); err != nil {
		return nil, err
	}
	var (
		out   []run.Attempt
		total int64
	)
	for _, a := range m.attempts[runID] {
		if a.Seq <= after {
			continue
		}
		total += int64(len(a.Input)+len(a.Output)+len(a.Error)) + 256
		if len(out) == limit || (len(out) > 0 && total > maxBytes) {
			break
		}
		out = append(out, a)
	}
	return out, nil
}

// memCatalog knows workflows per organization; err, when set, is the editor being down.
type memCatalog struct {
	workflows map[string]string // workflow id -> organization
	err       error
}

func (c *memCatalog) Workflow(_ context.Context, org string, ref port.WorkflowRef) (port.Snapshot, error) {
	if c.err != nil {
		return port.Snapshot{}, c.err
	}
	if c.workflows[ref.ID] != org {
		return port.Snapshot{}, run.ErrWorkflowNotFound
	}
	return port.Snapshot{ID: ref.ID, Version: 1}, nil
}

// TestTenancyOfReads: the list and logs routes answer one organization's data only, and their
// cursors resume only the list that issued them.
func TestTenancyOfReads(t *testing.T) {
	t.Parallel()

	type testBundle struct {
		orgA, orgB   string
		wfA, wfGone  string
		runA1, runA2 string
		runGone      string
		catalog      *memCatalog
		serve        func(org, target string) (int, map[string]any)
	}

	setup := func(t *testing.T) *testBundle {
		t.Helper()
		b := &testBundle{
			orgA: wire.NewID(wire.Organization), orgB: wire.NewID(wire.Organization),
			wfA: wire.NewID(wire.Workflow), wfGone: wire.NewID(wire.Workflow),
		}
		b.runA1, b.runA2, b.runGone = wire.NewID(wire.Run), wire.NewID(wire.Run), wire.NewID(wire.Run)
		reader := &memReader{
			runs: []run.Record{
				{ID: b.runA1, OrganizationID: b.orgA, WorkflowID: b.wfA, Status: run.StatusCompleted},
				{ID: b.runA2, OrganizationID: b.orgA, WorkflowID: b.wfA, Status: run.StatusCompleted},
				// The run of a workflow A has since deleted.
				{ID: b.runGone, OrganizationID: b.orgA, WorkflowID: b.wfGone, Status: run.StatusCompleted},
			},
			attempts: map[string][]run.Attempt{},
		}
		for i := range 5 {
			reader.attempts[b.runA1] = append(reader.attempts[b.runA1], run.Attempt{ID: wire.NewID(wire.Attempt), BlockID: "a", Status: "succeeded", Seq: int64(i + 1)})
			reader.attempts[b.runA2] = append(reader.attempts[b.runA2], run.Attempt{ID: wire.NewID(wire.Attempt), BlockID: "b", Status: "succeeded", Seq: int64(i + 1)})
		}
		b.catalog = &memCatalog{workflows: map[string]string{b.wfA: b.orgA}}
		router := httpapi.NewRouter(httpapi.Handlers{App: app.Application{Queries: app.Queries{
			ListRuns: query.NewListRunsHandler(reader, b.catalog),
			Runs:     query.NewRuns(reader),
		}}}, nil)
		b.serve = func(org, target string) (int, map[string]any) {
			t.Helper()
			req := httptest.NewRequest(http.MethodGet, target, nil)
			req = req.WithContext(internalauth.WithIdentity(req.Context(), internalauth.Identity{OrganizationID: org, AuthMode: internalauth.ModeSession}))
			rec := httptest.NewRecorder()
			router.ServeHTTP(rec, req)
			var body map[string]any
			require.NoError(t, json.Unmarshal(rec.Body.Bytes(), &body), rec.Body.String())
			return rec.Code, body
		}
		return b
	}

	requireError := func(t *testing.T, status int, body map[string]any, wantStatus int, code string) {
		t.Helper()
		require.Equal(t, wantStatus, status, body)
		require.Equal(t, code, body["error"], body)
	}

	t.Run("ForeignWorkflowRunsAre404", func(t *testing.T) {
		t.Parallel()
		b := setup(t)
		for _, target := range []string{
			"/api/workflows/" + b.wfA + "/runs",
			"/api/workflows/" + b.wfA + "/runs?status=failed",
			"/api/runs?workflowId=" + b.wfA,
			"/api/workflows/" + wire.NewID(wire.Workflow) + "/runs",
			"/api/workflows/not-an-id/runs",
			"/api/runs?workflowId=%00",
			"/api/runs?workflowId=%ff",
		} {
			status, body := b.serve(b.orgB, target)
			requireError(t, status, body, http.StatusNotFound, "not_found")
		}
		// A's own: its runs, and an empty page of a filter that matches none.
		status, body := b.serve(b.orgA, "/api/workflows/"+b.wfA+"/runs")
		require.Equal(t, http.StatusOK, status, body)
		require.Len(t, body["items"], 2)
		status, body = b.serve(b.orgA, "/api/workflows/"+b.wfA+"/runs?status=failed")
		require.Equal(t, http.StatusOK, status, body)
		require.Empty(t, body["items"])
	})

	t.Run("DeletedWorkflowKeepsItsRunsListed", func(t *testing.T) {
		t.Parallel()
		b := setup(t)
		status, body := b.serve(b.orgA, "/api/workflows/"+b.wfGone+"/runs")
		require.Equal(t, http.StatusOK, status, body)
		require.Len(t, body["items"], 1)
		status, body = b.serve(b.orgA, "/api/workflows/"+b.wfGone+"/runs?status=running")
		require.Equal(t, http.StatusOK, status, body)
		require.Empty(t, body["items"])
		status, body = b.serve(b.orgB, "/api/workflows/"+b.wfGone+"/runs")
		requireError(t, status, body, http.StatusNotFound, "not_found")
	})

	t.Run("EditorDownIs503", func(t *testing.T) {
		t.Parallel()
		b := setup(t)
		b.catalog.err = errors.New("connection refused")
		status, body := b.serve(b.orgB, "/api/workflows/"+b.wfA+"/runs")
		requireError(t, status, body, http.StatusServiceUnavailable, "unavailable")
		// Runs of the organization prove the workflow is its without the editor.
		status, body = b.serve(b.orgA, "/api/workflows/"+b.wfA+"/runs")
		require.Equal(t, http.StatusOK, status, body)
		require.Len(t, body["items"], 2)
	})

	t.Run("LogsCursorIsBoundToItsRun", func(t *testing.T) {
		t.Parallel()
		b := setup(t)
		status, body := b.serve(b.orgA, "/api/runs/"+b.runA1+"/logs?limit=3")
		require.Equal(t, http.StatusOK, status, body)
		require.Len(t, body["items"], 3)
		cursor := body["nextCursor"].(string)

		status, body = b.serve(b.orgA, "/api/runs/"+b.runA2+"/logs?after="+url.QueryEscape(cursor))
		requireError(t, status, body, http.StatusBadRequest, "invalid_query")

		status, body = b.serve(b.orgA, "/api/runs/"+b.runA1+"/logs?after="+url.QueryEscape(cursor))
		require.Equal(t, http.StatusOK, status, body)
		require.Len(t, body["items"], 2, "the rest of the run's own logs")
	})

	t.Run("RunsCursorIsBoundToItsFilters", func(t *testing.T) {
		t.Parallel()
		b := setup(t)
		status, body := b.serve(b.orgA, "/api/runs?limit=1&workflowId="+b.wfA)
		require.Equal(t, http.StatusOK, status, body)
		cursor := url.QueryEscape(body["nextCursor"].(string))

		for _, target := range []string{
			"/api/runs?after=" + cursor,
			"/api/runs?status=completed&workflowId=" + b.wfA + "&after=" + cursor,
			"/api/workflows/" + b.wfGone + "/runs?after=" + cursor,
		} {
			status, body = b.serve(b.orgA, target)
			requireError(t, status, body, http.StatusBadRequest, "invalid_query")
		}
		status, body = b.serve(b.orgB, "/api/runs?after="+cursor+"&workflowId="+b.wfA)
		require.Equal(t, http.StatusBadRequest, status, body, "nor in another organization")

		// The same list under its other path resumes.
		status, body = b.serve(b.orgA, "/api/workflows/"+b.wfA+"/runs?limit=1&after="+cursor)
		require.Equal(t, http.StatusOK, status, body)
		require.Len(t, body["items"], 1)
	})
}
