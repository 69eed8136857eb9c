package service_test

import (
	"context"
	"fmt"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"
	"time"

	"connectrpc.com/connect"
	"github.com/jackc/pgx/v5"
	"github.com/stretchr/testify/require"

	"svc.dev/libs/boot"
	"svc.dev/libs/internalauth"
	"svc.dev/libs/testkit"
	"svc.dev/libs/wire"
	orchestratorv1 "svc.dev/proto/gen/orchestrator/v1"
	"svc.dev/proto/gen/orchestrator/v1/orchestratorv1connect"
	"svc.dev/services/run-orchestrator/internal/service"
)

// rpcClient calls orchestrator.v1 on the system signed as the scheduler.
func (s *system) rpcClient(t testing.TB) orchestratorv1connect.OrchestratorServiceClient {
	t.Helper()
	hc := &http.Client{Transport: internalauth.Transport{Signer: s.signer, Base: http.DefaultTransport, Now: time.Now}}
	return orchestratorv1connect.NewOrchestratorServiceClient(hc, s.url)
}

func serviceContext(t testing.TB) context.Context {
	t.Helper()
	return internalauth.WithIdentity(t.Context(), internalauth.Identity{Service: "scheduler", AuthMode: internalauth.ModeService})
}

func startItem(org, wf, input, key string) *orchestratorv1.StartRunRequest {
	return &orchestratorv1.StartRunRequest{OrganizationId: org, Workflow: &orchestratorv1.StartRunRequest_WorkflowId{WorkflowId: wf},
		InputJson: input, IdempotencyKey: key, TriggerKind: "schedule", TriggerJson: `{"scheduleId":"sch_x","cutoff":"2026-11-22T10:03:00.000Z"}`}
}

func startedOf(t testing.TB, r *orchestratorv1.StartRunResponse) *orchestratorv1.Started {
	t.Helper()
	s := r.GetStarted()
	require.NotNil(t, s, "want started, got %v", r)
	require.Regexp(t, `^run_`, s.GetRunId())
	return s
}

// countRows counts what the orchestrator schema holds for org: its runs, its idempotency
// keys, and its stranded runs, which neither ended (at their dispatch) nor have a job.
func countRows(t testing.TB, dbURL, org string) (runs, keys, stranded int) {
	t.Helper()
	conn, err := pgx.Connect(t.Context(), dbURL)
	require.NoError(t, err)
	defer conn.Close(context.WithoutCancel(t.Context()))
	require.NoError(t, conn.QueryRow(t.Context(), `SELECT
		(SELECT count(*) FROM orchestrator.runs WHERE organization_id = $1),
		(SELECT count(*) FROM orchestrator.idempotency_keys WHERE organization_id = $1),
		(SELECT count(*) FROM orchestrator.runs r WHERE r.organization_id = $1
			AND r.status NOT IN ('completed', 'failed', 'cancelled')
			AND NOT EXISTS (SELECT 1 FROM orchestrator.river_job j WHERE j.args->>'run_id' = r.id))`,
		org).Scan(&runs, &keys, &stranded))
	return runs, keys, stranded
}

func TestStartRuns(t *testing.T) {
	t.Parallel()
	sys := start(t)

	t.Run("MixedBatchAnsweredItemByItem", func(t *testing.T) {
		t.Parallel()
		b := sys.setup(t)
		other := sys.setup(t)
		say := def([]string{manual, `{"block_id":"say","type":"log","params":{"message":"{{ input }}"}}`}, edge("start", "say"))
		b.workflow(t, "wf_ok", 1, say)
		b.workflow(t, "wf_s", 1, def([]string{`{"block_id":"start","type":"trigger.manual","params":{"input_schema":{"type":"object","required":["n"],"properties":{"n":{"type":"integer"}}}}}`}))
		b.workflow(t, "wf_bad", 1, say, "no_trigger")
		other.workflow(t, "wf_ok", 1, say)
		used := b.startRun(t, "wf_ok", map[string]any{"idempotencyKey": "used"})

		items := []*orchestratorv1.StartRunRequest{
			startItem(b.org, "wf_ok", `{"i":0}`, "new"),     // 0: a new run
			startItem(b.org, "wf_ok", `{"i":1}`, "new"),     // 1: the same key in the batch: run 0
			startItem(b.org, "wf_ok", `{"i":2}`, "used"),    // 2: a key already used: that run
			startItem(b.org, "wf_missing", "", "missing"),   // 3: no such workflow
			startItem(b.org, "wf_s", `{"n":"x"}`, "schema"), // 4: input fails the schema
			startItem(b.org, "wf_s", `{"n":3}`, "schema"),   // 5: same key, valid: a new run (4 stored nothing)
			startItem(b.org, "wf_ok", `{"i":6}`, ""),        // 6: no key: a new run
			startItem(b.org, "wf_bad", "", "bad"),           // 7: a workflow with validation errors
			startItem(b.org, "wf_ok", `not json`, ""),       // 8: input that is no JSON
			startItem(other.org, "wf_ok", `{"i":9}`, "new"), // 9: another organization's "new"
			startItem(b.org, "wf_ok", `{"i":10}`, "new"),    // 10: run 0 again
			startItem("", "wf_ok", "", ""),                  // 11: no organization
		}
		resp, err := sys.rpcClient(t).StartRuns(serviceContext(t), connect.NewRequest(&orchestratorv1.StartRunsRequest{Requests: items}))
		require.NoError(t, err)
		got := resp.Msg.GetResponses()
		require.Len(t, got, len(items))

		first := startedOf(t, got[0])
		require.False(t, first.GetDeduplicated())
		for _, i := range []int{1, 10} {
			s := startedOf(t, got[i])
			require.Equal(t, first.GetRunId(), s.GetRunId(), "item %d", i)
			require.True(t, s.GetDeduplicated(), "item %d", i)
		}
		s := startedOf(t, got[2])
		require.Equal(t, used, s.GetRunId())
		require.True(t, s.GetDeduplicated())
		require.NotNil(t, got[3].GetNotFound(), "%v", got[3])
		require.NotNil(t, got[11].GetNotFound(), "%v", got[11])
		require.Equal(t, "invalid_body", got[4].GetRejected().GetCode(), "%v", got[4])
		require.Contains(t, got[4].GetRejected().GetMessage(), "/input/n")
		require.Equal(t, "invalid_body", got[8].GetRejected().GetCode(), "%v", got[8])
		require.Equal(t, "workflow_invalid", got[7].GetRejected().GetCode(), "%v", got[7])
		started := map[string]bool{first.GetRunId(): true}
		for _, i := range []int{5, 6, 9} {
			s := startedOf(t, got[i])
			require.False(t, s.GetDeduplicated(), "item %d", i)
			require.False(t, started[s.GetRunId()], "item %d: a run of its own", i)
			started[s.GetRunId()] = true
		}

		// Every new run runs to completion, with its own input and the scheduler's trigger.
		for _, tc := range []struct {
			b     *testBundle
			item  int
			input map[string]any
		}{{b, 0, map[string]any{"i": float64(0)}}, {b, 5, map[string]any{"n": float64(3)}}, {b, 6, map[string]any{"i": float64(6)}}, {other, 9, map[string]any{"i": float64(9)}}} {
			run := tc.b.waitStatus(t, got[tc.item].GetStarted().GetRunId(), "completed")
			require.Equal(t, tc.input, run["input"], "item %d", tc.item)
			require.Equal(t, map[string]any{"kind": "schedule", "scheduleId": "sch_x", "cutoff": "2026-11-22T10:03:00.000Z"}, run["trigger"])
		}
		// Stored: the run started over HTTP and 3 of the batch for b, 1 for other; a key per
		// keyed run; every run ended at its dispatch (trigger and log) or has a job.
		runs, keys, stranded := countRows(t, sys.dbURL, b.org)
		require.Equal(t, []int{4, 3, 0}, []int{runs, keys, stranded}, "runs, keys, stranded runs of b")
		runs, keys, stranded = countRows(t, sys.dbURL, other.org)
		require.Equal(t, []int{1, 1, 0}, []int{runs, keys, stranded}, "runs, keys, stranded runs of other")

		// The same batch again starts only the runs without a key.
		resp, err = sys.rpcClient(t).StartRuns(serviceContext(t), connect.NewRequest(&orchestratorv1.StartRunsRequest{Requests: items}))
		require.NoError(t, err)
		again := resp.Msg.GetResponses()
		for _, i := range []int{0, 1, 2, 5, 9, 10} {
			s := startedOf(t, again[i])
			require.Equal(t, got[i].GetStarted().GetRunId(), s.GetRunId(), "item %d", i)
			require.True(t, s.GetDeduplicated(), "item %d", i)
		}
		require.NotEqual(t, got[6].GetStarted().GetRunId(), startedOf(t, again[6]).GetRunId())
		runs, _, _ = countRows(t, sys.dbURL, b.org)
		require.Equal(t, 5, runs)
	})

	t.Run("TooManyIsInvalidArgument", func(t *testing.T) {
		t.Parallel()
		b := sys.setup(t)
		b.workflow(t, "wf_ok", 1, def([]string{manual}))
		items := make([]*orchestratorv1.StartRunRequest, 501)
		for i := range items {
			items[i] = startItem(b.org, "wf_ok", "", fmt.Sprint(i))
		}
		_, err := sys.rpcClient(t).StartRuns(serviceContext(t), connect.NewRequest(&orchestratorv1.StartRunsRequest{Requests: items}))
		require.Equal(t, connect.CodeInvalidArgument, connect.CodeOf(err), "%v", err)
		runs, _, _ := countRows(t, sys.dbURL, b.org)
		require.Zero(t, runs)

		resp, err := sys.rpcClient(t).StartRuns(serviceContext(t), connect.NewRequest(&orchestratorv1.StartRunsRequest{Requests: items[:500]}))
		require.NoError(t, err)
		require.Len(t, resp.Msg.GetResponses(), 500)
		runs, keys, stranded := countRows(t, sys.dbURL, b.org)
		require.Equal(t, []int{500, 500, 0}, []int{runs, keys, stranded})

		resp, err = sys.rpcClient(t).StartRuns(serviceContext(t), connect.NewRequest(&orchestratorv1.StartRunsRequest{}))
		require.NoError(t, err)
		require.Empty(t, resp.Msg.GetResponses())
	})

	t.Run("RacingStartsMakeOneRunPerKey", func(t *testing.T) {
		t.Parallel()
		b := sys.setup(t)
		b.workflow(t, "wf_ok", 1, def([]string{manual}))
		const keys = 40
		// Batches of every key in several orders race single StartRuns of every key.
		var (
			mu      sync.Mutex
			answers = map[string]map[string]bool{} // key → run ids answered
			wg      sync.WaitGroup
		)
		record := func(key, id string) {
			mu.Lock()
			defer mu.Unlock()
			if answers[key] == nil {
				answers[key] = map[string]bool{}
			}
			answers[key][id] = true
		}
		client := sys.rpcClient(t)
		for w := range 6 {
			wg.Go(func() {
				items := make([]*orchestratorv1.StartRunRequest, keys)
				for i := range keys {
					k := (i*(w+1) + w) % keys // some orders repeat keys: duplicates within a batch
					items[i] = startItem(b.org, "wf_ok", "", fmt.Sprintf("k%d", k))
				}
				resp, err := client.StartRuns(serviceContext(t), connect.NewRequest(&orchestratorv1.StartRunsRequest{Requests: items}))
				if !assertNoError(t, err) {
					return
				}
				for i, r := range resp.Msg.GetResponses() {
					record(items[i].GetIdempotencyKey(), r.GetStarted().GetRunId())
				}
			})
			wg.Go(func() {
				for i := range keys {
					item := startItem(b.org, "wf_ok", "", fmt.Sprintf("k%d", (i+w*7)%keys))
					resp, err := client.StartRun(serviceContext(t), connect.NewRequest(item))
					if !assertNoError(t, err) {
						return
					}
					record(item.GetIdempotencyKey(), resp.Msg.GetStarted().GetRunId())
				}
			})
		}
		wg.Wait()
		require.Len(t, answers, keys)
		ids := map[string]bool{}
		for k, got := range answers {
			require.Len(t, got, 1, "key %s answered %v", k, got)
			for id := range got {
				require.NotEmpty(t, id, k)
				ids[id] = true
			}
		}
		require.Len(t, ids, keys, "a run per key")
		runs, nkeys, stranded := countRows(t, sys.dbURL, b.org)
		require.Equal(t, []int{keys, keys, 0}, []int{runs, nkeys, stranded}, "no run of a lost race is left behind")
		for id := range ids {
			b.waitStatus(t, id, "completed")
		}
	})
}

// assertNoError fails the test from any goroutine (require would only stop that goroutine).
func assertNoError(t *testing.T, err error) bool {
	t.Helper()
	if err != nil {
		t.Errorf("unexpected error: %v", err)
		return false
	}
	return true
}

func TestStartRunsWithEditorDown(t *testing.T) {
	t.Parallel()
	secret := strings.Repeat("s", 32)
	cfg := service.Config{Addr: ":0", EditorURL: "http://127.0.0.1:1", Workers: 2, Base: boot.Config{
		DatabaseURL: testkit.NewDatabase(t), InternalSecret: secret, LogLevel: slog.LevelError, Drain: time.Second,
		DatabaseMaxConns: 10,
	}}
	app, err := service.NewApplication(context.Background(), cfg, slog.New(slog.DiscardHandler))
	require.NoError(t, err)
	t.Cleanup(app.Close)
	srv := httptest.NewServer(app.Handler())
	t.Cleanup(srv.Close)
	signer, err := internalauth.NewSigner(secret)
	require.NoError(t, err)
	sys := &system{url: srv.URL, dbURL: cfg.Base.DatabaseURL, signer: signer}
	org := wire.NewID(wire.Organization)
	// Items the request alone answers (no organization, bad JSON) do not make the batch
	// succeed: the starts that need the editor fail it, and nothing is stored.
	_, err = sys.rpcClient(t).StartRuns(serviceContext(t), connect.NewRequest(&orchestratorv1.StartRunsRequest{Requests: []*orchestratorv1.StartRunRequest{
		startItem(org, "wf_a", "", "k1"), startItem(org, "wf_b", `{"x":1}`, ""), startItem("", "wf_a", "", ""), startItem(org, "wf_a", "nope", ""),
	}}))
	require.Equal(t, connect.CodeUnavailable, connect.CodeOf(err), "%v", err)
	runs, keys, stranded := countRows(t, sys.dbURL, org)
	require.Equal(t, []int{0, 0, 0}, []int{runs, keys, stranded}, "nothing half-written")
}
