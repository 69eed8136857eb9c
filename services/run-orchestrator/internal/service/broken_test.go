package service_test

import (
	"context"
	"net/http"
	"net/http/httptest"
	"sync/atomic"
	"testing"

	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/stretchr/testify/require"

	"svc.dev/libs/wire"
)

// Issue 12, "nothing stuck": a stored run the engine cannot read (here input holding 1e309,
// as runs started before the JSON boundary existed could; or a state that is not an object)
// and a job that cannot start are failed with a recorded attempt and a readable error, and
// cancel and signals answer on every such run instead of a 500.

// storeRun writes a run row as dispatch would, with the given input and state, bypassing the
// API's checks; withJob also queues its River job (as dispatch does in the same commit).
func storeRun(t *testing.T, pool *pgxpool.Pool, b *testBundle, definition, input string, withJob bool) string {
	t.Helper()
	id := wire.NewID(wire.Run)
	_, err := pool.Exec(t.Context(), `WITH d AS (INSERT INTO orchestrator.run_definitions (organization_id, workflow_id, hash, definition)
			VALUES ($2, 'wf_broken', sha256(convert_to($3, 'UTF8')), $3::jsonb) ON CONFLICT DO NOTHING)
		INSERT INTO orchestrator.runs (id, organization_id, workflow_id, workflow_version, definition_hash, input, status, trigger)
		VALUES ($1, $2, 'wf_broken', 1, sha256(convert_to($3, 'UTF8')), $4::jsonb, 'queued', '{"kind":"manual"}')`, id, b.org, definition, input)
	require.NoError(t, err)
	if withJob {
		queueJob(t, pool, id, 25)
	}
	return id
}

func queueJob(t *testing.T, pool *pgxpool.Pool, runID string, maxAttempts int) {
	t.Helper()
	_, err := pool.Exec(t.Context(), `INSERT INTO orchestrator.river_job (args, kind, max_attempts, priority, queue, state)
		VALUES (jsonb_build_object('run_id', $1::text), 'svc-runtime', $2, 1, 'default', 'available')`, runID, maxAttempts)
	require.NoError(t, err)
}

func TestBrokenRunsEnd(t *testing.T) {
	t.Parallel()
	sys := start(t)
	pool := db(t, sys.dbURL)
	b := sys.setup(t)
	waitDef := def([]string{manual,
		`{"block_id":"hold","type":"wait","params":{"signal":"go"}}`,
		`{"block_id":"after","type":"log","params":{"message":"{{ input.n }}"}}`,
	}, edge("start", "hold"), edge("hold", "after"))
	b.workflow(t, "wf_wait", 1, waitDef)

	requireFailedBy := func(t *testing.T, id, code, fragment string) {
		t.Helper()
		got := b.waitStatus(t, id, "failed")
		errBody, _ := got["error"].(map[string]any)
		require.Contains(t, errBody["message"], fragment, got)
		var recorded bool
		for _, a := range b.logs(t, id) {
			require.NotEqual(t, "running", a["status"], "no attempt is left running: %v", a)
			if e, _ := a["error"].(map[string]any); e != nil && e["code"] == code {
				recorded = true
				require.Equal(t, "failed", a["status"])
				require.Contains(t, e["message"], fragment)
			}
		}
		require.True(t, recorded, "an attempt records why the run failed")
		// Terminal: cancel says so, signals are refused.
		r := b.do(t, "POST", "/api/runs/"+id+"/cancel", nil)
		require.Equal(t, http.StatusConflict, r.Status, r.Raw)
		r = b.do(t, "POST", "/api/runs/"+id+"/signals", map[string]any{"name": "go"})
		require.Equal(t, http.StatusConflict, r.Status, r.Raw)
	}

	t.Run("InputThatCannotBeReadFailsTheRun", func(t *testing.T) {
		t.Parallel()
		id := storeRun(t, pool, b, waitDef, `{"n":1e309}`, true)
		requireFailedBy(t, id, "run_unreadable", `run input at "/n": number 1000000000`)
		r := b.do(t, "GET", "/api/runs/"+id, nil)
		require.Equal(t, http.StatusOK, r.Status, r.Raw)
		require.Contains(t, r.Raw, `"input":{"n":10000000000000000`, "the input is shown as stored")
	})

	t.Run("CancelOfAQueuedRunWithoutAJob", func(t *testing.T) {
		t.Parallel()
		id := storeRun(t, pool, b, waitDef, `{"n":-1e400}`, false)
		for range 2 {
			r := b.do(t, "POST", "/api/runs/"+id+"/cancel", nil)
			require.Equal(t, http.StatusAccepted, r.Status, r.Raw)
			require.Equal(t, "cancelled", r.Body["status"])
		}
		r := b.do(t, "POST", "/api/runs/"+id+"/signals", map[string]any{"name": "go"})
		require.Equal(t, http.StatusConflict, r.Status, r.Raw)
	})

	t.Run("SignalToABrokenRunFailsIt", func(t *testing.T) {
		t.Parallel()
		id := storeRun(t, pool, b, waitDef, `{"n":1e309}`, false)
		r := b.do(t, "POST", "/api/runs/"+id+"/signals", map[string]any{"name": "go"})
		require.Equal(t, http.StatusAccepted, r.Status, r.Raw)
		require.Equal(t, false, r.Body["delivered"])
		requireFailedBy(t, id, "run_unreadable", "outside the range of a 64-bit float")
	})

	t.Run("StateThatCannotBeRead", func(t *testing.T) {
		t.Parallel()
		// Two runs parked on their signal wait, then a block's stored state is overwritten with
		// one that is not a state (a status no engine writes, a wait that is not an object):
		// the one signalled fails, the one cancelled is cancelled.
		signalled := b.startRun(t, "wf_wait", map[string]any{"input": map[string]any{"n": 1}})
		cancelled := b.startRun(t, "wf_wait", map[string]any{"input": map[string]any{"n": 2}})
		for _, id := range []string{signalled, cancelled} {
			b.waitStatus(t, id, "waiting")
			_, err := pool.Exec(context.Background(), `UPDATE orchestrator.run_blocks SET status = 'not a state', wait = '"not a wait"' WHERE run_id = $1 AND block_id = 'hold'`, id)
			require.NoError(t, err)
		}
		r := b.do(t, "POST", "/api/runs/"+signalled+"/signals", map[string]any{"name": "go"})
		require.Equal(t, http.StatusAccepted, r.Status, r.Raw)
		requireFailedBy(t, signalled, "run_unreadable", `block hold has status "not a state"`)

		r = b.do(t, "POST", "/api/runs/"+cancelled+"/cancel", nil)
		require.Equal(t, http.StatusAccepted, r.Status, r.Raw)
		got := b.waitStatus(t, cancelled, "cancelled")
		require.NotNil(t, got["finishedAt"])
		var state string
		require.NoError(t, pool.QueryRow(context.Background(), `SELECT status FROM orchestrator.run_blocks WHERE run_id = $1 AND block_id = 'hold'`, cancelled).Scan(&state))
		require.Equal(t, `not a state`, state, "a state the engine cannot read is kept as stored")
	})

	t.Run("JobThatCannotStartFailsTheRunOnItsLastTry", func(t *testing.T) {
		t.Parallel()
		// The attempt row the engine inserts first already exists, so every try of the job
		// fails on the unique key; the job's one try is its last, and the run fails with it.
		id := storeRun(t, pool, b, waitDef, `{"n":3}`, false)
		_, err := pool.Exec(t.Context(), `INSERT INTO orchestrator.step_attempts (id, run_id, block_id, type, attempt, status, replica, seq, started_at, finished_at)
			VALUES ($1, $2, 'start', 'trigger.manual', 1, 'succeeded', 'elsewhere', 1000, now(), now())`, wire.NewID(wire.Attempt), id)
		require.NoError(t, err)
		queueJob(t, pool, id, 1)
		requireFailedBy(t, id, "run_unreadable", "duplicate key")
	})

	t.Run("SignalPayloadIsKeptAsSent", func(t *testing.T) {
		t.Parallel()
		id := b.startRun(t, "wf_wait", map[string]any{"input": map[string]any{"n": 1}})
		b.waitStatus(t, id, "waiting")
		r := b.do(t, "POST", "/api/runs/"+id+"/signals", rawBody(`{"name":"go","payload":{"big":1e308,"small":-5e-324,"s":"é"}}`))
		require.Equal(t, http.StatusAccepted, r.Status, r.Raw)
		b.waitStatus(t, id, "completed")
		for _, a := range b.logs(t, id) {
			if a["block_id"] == "hold" {
				out := a["output"].(map[string]any)["signal"].(map[string]any)
				require.Equal(t, map[string]any{"big": 1e308, "small": -5e-324, "s": "é"}, out["payload"])
			}
		}
	})
}

// TestJSONBoundary: what the boundary refuses never reaches the engine (issue 12, defect 1).
func TestJSONBoundary(t *testing.T) {
	t.Parallel()
	sys := start(t)
	b := sys.setup(t)
	b.workflow(t, "wf_wait", 1, def([]string{manual,
		`{"block_id":"hold","type":"wait","params":{"signal":"go"}}`,
	}, edge("start", "hold")))
	id := b.startRun(t, "wf_wait", nil)
	b.waitStatus(t, id, "waiting")

	for _, tc := range []struct{ name, path, body, pointer, fragment string }{
		{"InputOverflow", "/api/workflows/wf_wait/run", `{"input":{"n":1e309}}`, "/input/n", "outside the range"},
		{"InputNegativeOverflow", "/api/workflows/wf_wait/run", `{"input":{"n":-1e400}}`, "/input/n", "outside the range"},
		{"InputItselfOverflow", "/api/workflows/wf_wait/run", `{"input":1e400}`, "/input", "outside the range"},
		{"InputLongInteger", "/api/workflows/wf_wait/run", `{"input":{"n":123456789012345678901234567890}}`, "/input/n", "send it as a string"},
		{"InputDuplicateMember", "/api/workflows/wf_wait/run", `{"input":{"n":1,"n":2}}`, "/input/n", "more than once"},
		{"SignalPayloadOverflow", "/api/runs/" + id + "/signals", `{"name":"go","payload":{"n":1e309}}`, "/payload/n", "outside the range"},
		{"SignalInvalidUTF8", "/api/runs/" + id + "/signals", "{\"name\":\"go\",\"payload\":\"\xff\"}", "/payload", "UTF-8"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			r := b.do(t, "POST", tc.path, rawBody(tc.body))
			require.Equal(t, http.StatusBadRequest, r.Status, r.Raw)
			require.Equal(t, "invalid_body", r.Body["error"], r.Raw)
			issues := r.Body["issues"].([]any)
			require.Equal(t, tc.pointer, issues[0].(map[string]any)["path"], r.Raw)
			require.Contains(t, issues[0].(map[string]any)["message"], tc.fragment)
		})
	}
	// Idempotency keys are text Postgres can store: a header may carry any byte.
	r := b.do(t, "POST", "/api/workflows/wf_wait/run", nil, "Idempotency-Key", "k\xff\xfe")
	require.Equal(t, http.StatusBadRequest, r.Status, r.Raw)
	require.Equal(t, "/idempotencyKey", r.Body["issues"].([]any)[0].(map[string]any)["path"], r.Raw)
	r = b.do(t, "POST", "/api/workflows/wf_wait/run", rawBody(`{"idempotencyKey":"a\u0007b"}`))
	require.Equal(t, http.StatusBadRequest, r.Status, r.Raw)
	require.Equal(t, "/idempotencyKey", r.Body["issues"].([]any)[0].(map[string]any)["path"], r.Raw)

	// A workflow id that is no text (a path may carry %FF or %00) is not found.
	for _, path := range []string{"/api/workflows/%FF%FE/run", "/api/workflows/%00/run", "/api/workflows/%C0%AF/run"} {
		r := b.do(t, "POST", path, nil)
		require.Equal(t, http.StatusNotFound, r.Status, "%s: %s", path, r.Raw)
	}

	// Nothing reached the run: it still waits, and its signal is not consumed.
	got := b.do(t, "GET", "/api/runs/"+id, nil)
	require.Equal(t, "waiting", got.Body["status"], got.Raw)
	list := b.do(t, "GET", "/api/workflows/wf_wait/runs", nil)
	require.Len(t, list.Body["items"], 1, "no refused start stored a run")
}

// TestJobTryFailingMidStepIsReclaimed: a job's try that fails after its attempt row committed
// (here the result's transaction fails once; in the chaos suite Postgres restarted) leaves the
// block running on a live replica, which no sweeper takes. The job's next try records that
// attempt lost and runs the block again; the run completes (it stayed running for good).
func TestJobTryFailingMidStepIsReclaimed(t *testing.T) {
	t.Parallel()
	var calls atomic.Int32
	sink := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) {
		calls.Add(1)
		w.Header().Set("Content-Type", "application/json")
		_, _ = w.Write([]byte(`{"ok":true}`))
	}))
	t.Cleanup(sink.Close)
	sys := startWith(t, allowPrivate)
	pool := db(t, sys.dbURL)
	// The first result recorded for block "step" fails inside Postgres; a sequence is not
	// rolled back with the transaction, so only the first one does.
	_, err := pool.Exec(t.Context(), `
		CREATE SEQUENCE orchestrator.fail_once;
		CREATE FUNCTION orchestrator.fail_once() RETURNS trigger LANGUAGE plpgsql AS $$
		BEGIN
			IF NEW.block_id = 'step' AND NEW.status <> 'running' AND nextval('orchestrator.fail_once') = 1 THEN
				RAISE EXCEPTION 'injected: the result transaction fails';
			END IF;
			RETURN NEW;
		END $$;
		CREATE TRIGGER fail_once BEFORE UPDATE ON orchestrator.step_attempts FOR EACH ROW EXECUTE FUNCTION orchestrator.fail_once();`)
	require.NoError(t, err)
	b := sys.setup(t)
	b.workflow(t, "wf_once", 1, def([]string{manual,
		`{"block_id":"step","type":"http.request","params":{"method":"GET","url":"` + sink.URL + `"}}`,
		`{"block_id":"after","type":"log","params":{"message":"{{ steps.step.output.status }}"}}`,
	}, edge("start", "step"), edge("step", "after")))

	id := b.startRun(t, "wf_once", nil)
	got := b.waitStatus(t, id, "completed")
	require.Equal(t, map[string]any{"after": map[string]any{"message": "200"}}, got["output"])
	steps := blockLogs(b.logs(t, id), "step")
	require.Len(t, steps, 2, "the lost attempt and the one that ran again")
	require.Equal(t, "lost", steps[0]["status"])
	require.Equal(t, "lost", steps[0]["error"].(map[string]any)["code"])
	require.Equal(t, "succeeded", steps[1]["status"])
	require.EqualValues(t, 2, calls.Load(), "at least once: the lost attempt's call, then the one recorded")
}
