package service_test

import (
	"context"
	"encoding/json"
	"fmt"
	"log/slog"
	"net/http"
	"testing"
	"time"

	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/jackc/pgx/v5/stdlib"
	"github.com/pressly/goose/v3"
	"github.com/riverqueue/river/riverdriver/riverpgxv5"
	"github.com/riverqueue/river/rivermigrate"
	"github.com/stretchr/testify/require"

	"svc.dev/libs/pgdb"
	"svc.dev/libs/testkit"
	"svc.dev/libs/wire"
	"svc.dev/services/run-orchestrator/internal/service"
	"svc.dev/services/run-orchestrator/migrations"
)

// This file is long (about 500 lines) for a reason: it rebuilds the schema and the rows of the
// previous engine by hand (runs, attempts, waits, River jobs as that version wrote them), and
// those fixtures belong with the two upgrade tests that use them.

// The upgrade to per-block storage (migration 0007) with runs in flight. The database is
// brought to the schema before 0007 (goose version 6, River's tables beside it), and rows are
// written as the previous engine left them: runs.state as one JSON document, the attempts,
// the waits and River's jobs. Then the new service starts on it, applies 0007 itself and must
// finish every run that was going.

// oldReplica is the replica of the previous version that held the runs; it is gone (it has no
// row in replicas), as after a rolling upgrade.
const oldReplica = "old-replica"

// upgradeSchema is the service's schema (River's tables live there too); upgradeJobKind is
// the kind of the engine's River jobs.
const (
	upgradeSchema  = "orchestrator"
	upgradeJobKind = "svc-runtime"
)

// migrateToBeforeUpgrade applies the service's migrations up to version 6 exactly, as
// pgdb.Migrate applies them at start-up (goose provider, default version table, in schema
// orchestrator through the pool's search_path), and River's migrations as engine.New does.
func migrateToBeforeUpgrade(t *testing.T, url string) {
	t.Helper()
	ctx := t.Context()
	pool, provider := migrationProvider(t, url, "upgrade-test")
	_, err := provider.UpTo(ctx, 6)
	require.NoError(t, err)
	v, err := provider.GetDBVersion(ctx)
	require.NoError(t, err)
	require.EqualValues(t, 6, v, "the schema before per-block storage")

	m, err := rivermigrate.New(riverpgxv5.New(pool), &rivermigrate.Config{Schema: upgradeSchema, Logger: slog.New(slog.DiscardHandler)})
	require.NoError(t, err)
	_, err = m.Migrate(ctx, rivermigrate.DirectionUp, nil)
	require.NoError(t, err)
}

// migrationProvider opens a pool on url in the orchestrator's schema and a goose provider of
// the service's migrations over it, as pgdb.Migrate uses them at start-up; both close when
// the test ends.
func migrationProvider(t *testing.T, url, service string) (*pgxpool.Pool, *goose.Provider) {
	t.Helper()
	pool, err := pgdb.Open(t.Context(), pgdb.Config{URL: url, Schema: upgradeSchema, Service: service, MaxConns: 2})
	require.NoError(t, err)
	t.Cleanup(pool.Close)
	_, err = pool.Exec(t.Context(), `CREATE SCHEMA IF NOT EXISTS `+upgradeSchema)
	require.NoError(t, err)
	sqlDB := stdlib.OpenDBFromPool(pool)
	t.Cleanup(func() { _ = sqlDB.Close() })
	provider, err := goose.NewProvider(goose.DialectPostgres, sqlDB, migrations.FS, goose.WithDisableGlobalRegistry(true))
	require.NoError(t, err)
	return pool, provider
}

// oldEngine writes rows as the engine before per-block storage wrote them.
type oldEngine struct {
	t    *testing.T
	pool *pgxpool.Pool
	org  string
}

// job inserts a River job of the run in state (completed jobs are finalized; a running one
// was fetched by oldReplica) and returns its id.
func (o *oldEngine) job(runID, state string) int64 {
	o.t.Helper()
	var id int64
	err := o.pool.QueryRow(o.t.Context(), `INSERT INTO orchestrator.river_job (args, kind, max_attempts, priority, queue, state,
			attempt, attempted_at, attempted_by, finalized_at, scheduled_at, created_at)
		SELECT jsonb_build_object('run_id', $1::text), $2, 25, 1, 'default', $3::orchestrator.river_job_state,
			CASE WHEN $3 = 'available' THEN 0 ELSE 1 END,
			CASE WHEN $3 = 'available' THEN NULL ELSE now() - interval '2 seconds' END,
			CASE WHEN $3 = 'available' THEN NULL ELSE ARRAY[$4::text] END,
			CASE WHEN $3 = 'completed' THEN now() - interval '1 second' END,
			now() - interval '3 seconds', now() - interval '3 seconds'
		RETURNING id`, runID, upgradeJobKind, state, oldReplica).Scan(&id)
	require.NoError(o.t, err)
	return id
}

// run inserts a run row with its state document; output is set for a completed run.
func (o *oldEngine) run(id, workflow, definition, input, status, state string, changeSeq, stateRev int64, output string) {
	o.t.Helper()
	var out *string
	if output != "" {
		out = &output
	}
	_, err := o.pool.Exec(o.t.Context(), `INSERT INTO orchestrator.runs (id, organization_id, workflow_id, workflow_version, definition,
			input, output, status, trigger, state, change_seq, state_rev, created_at, started_at, finished_at, updated_at)
		VALUES ($1, $2, $3, 1, $4::jsonb, $5::jsonb, $6::jsonb, $7, '{"kind":"manual"}', $8::jsonb, $9, $10,
			now() - interval '3 seconds',
			CASE WHEN $7 = 'queued' THEN NULL ELSE now() - interval '2 seconds' END,
			CASE WHEN $7 = 'completed' THEN now() - interval '1 second' END,
			now() - interval '1 second')`,
		id, o.org, workflow, definition, input, out, status, state, changeSeq, stateRev)
	require.NoError(o.t, err)
}

// attempt inserts a step attempt on oldReplica; one that is not running has finished with
// output. seq is the run's change sequence of its last change.
func (o *oldEngine) attempt(runID, block, typ string, n int, status, input, output string, seq int64) string {
	o.t.Helper()
	id := wire.NewID(wire.Attempt)
	var out *string
	if output != "" {
		out = &output
	}
	_, err := o.pool.Exec(o.t.Context(), `INSERT INTO orchestrator.step_attempts (id, run_id, block_id, type, attempt, status, input, output,
			replica, seq, started_at, finished_at)
		VALUES ($1, $2, $3, $4, $5, $6, $7::jsonb, $8::jsonb, $9, $10, now() - interval '2 seconds',
			CASE WHEN $6 = 'running' THEN NULL ELSE now() - interval '1 second' END)`,
		id, runID, block, typ, n, status, input, out, oldReplica, seq)
	require.NoError(o.t, err)
	return id
}

// wait inserts the wait of a block suspended by attempt attemptID, begun a second ago; a
// sleep wakes at wakeIn from now. It returns the wait's wake_at (zero without one).
func (o *oldEngine) wait(runID, block, kind, signal string, wakeIn time.Duration, attemptID string) time.Time {
	o.t.Helper()
	var sig *string
	if signal != "" {
		sig = &signal
	}
	var wake *time.Time
	err := o.pool.QueryRow(o.t.Context(), `INSERT INTO orchestrator.waits (run_id, block_id, kind, signal_name, wake_at, created_at, attempt_id)
		VALUES ($1, $2, $3, $4, CASE WHEN $5::bigint > 0 THEN now() + $5::bigint * interval '1 millisecond' END, now() - interval '1 second', $6)
		RETURNING wake_at`, runID, block, kind, sig, wakeIn.Milliseconds(), attemptID).Scan(&wake)
	require.NoError(o.t, err)
	if wake == nil {
		return time.Time{}
	}
	return *wake
}

// movedBlock is a run_blocks row.
type movedBlock struct {
	Status    string
	Attempts  int
	Lost      int
	Job       int64
	AttemptID *string
	InFlight  bool
	Wait      map[string]any
	Output    any
	Rev       int64
}

func readMovedBlock(t *testing.T, pool *pgxpool.Pool, runID, block string) movedBlock {
	t.Helper()
	var (
		b            movedBlock
		wait, output []byte
	)
	require.NoError(t, pool.QueryRow(t.Context(), `SELECT status, attempts, lost, job, attempt_id, in_flight, wait, output, rev
		FROM orchestrator.run_blocks WHERE run_id = $1 AND block_id = $2`, runID, block).
		Scan(&b.Status, &b.Attempts, &b.Lost, &b.Job, &b.AttemptID, &b.InFlight, &wait, &output, &b.Rev), "block %s of %s", block, runID)
	if wait != nil {
		require.NoError(t, json.Unmarshal(wait, &b.Wait))
	}
	if output != nil {
		require.NoError(t, json.Unmarshal(output, &b.Output))
	}
	return b
}

func textPtr(s string) *string { return &s }

// upgradeAttempts lists the run's attempts as block:attempt:status, checking that each is
// listed once and none is left running.
func upgradeAttempts(t *testing.T, b *testBundle, runID string) ([]string, []map[string]any) {
	t.Helper()
	logs := b.logs(t, runID)
	seen := map[string]bool{}
	var out []string
	for _, l := range logs {
		id := l["id"].(string)
		require.False(t, seen[id], "attempt %s listed twice", id)
		seen[id] = true
		require.NotEqual(t, "running", l["status"], "no attempt is left running: %v", l)
		out = append(out, fmt.Sprintf("%s:%v:%s", l["block_id"], l["attempt"], l["status"]))
	}
	return out, logs
}

func TestRunsInFlightAcrossTheUpgradeFinish(t *testing.T) {
	t.Parallel()
	ctx := t.Context()
	url := testkit.NewDatabase(t)
	migrateToBeforeUpgrade(t, url)
	pool := db(t, url)
	b := &testBundle{org: wire.NewID(wire.Organization)}
	old := &oldEngine{t: t, pool: pool, org: b.org}

	sleepDef := def([]string{manual,
		`{"block_id":"nap","type":"wait","params":{"duration":"3s"}}`,
		`{"block_id":"say","type":"log","params":{"message":"after the nap, n is {{ steps.start.output.n }}"}}`,
	}, edge("start", "nap"), edge("nap", "say"))
	signalDef := def([]string{manual,
		`{"block_id":"hold","type":"wait","params":{"signal":"go"}}`,
		`{"block_id":"say","type":"log","params":{"message":"got {{ steps.hold.output.signal.payload.word }} for {{ input.n }}"}}`,
	}, edge("start", "hold"), edge("hold", "say"))
	inFlightDef := def([]string{manual,
		`{"block_id":"work","type":"log","params":{"message":"work {{ steps.start.output.n }}"}}`,
		`{"block_id":"done","type":"log","params":{"message":"done after {{ steps.work.output.message }}"}}`,
	}, edge("start", "work"), edge("work", "done"))
	queuedDef := def([]string{manual,
		`{"block_id":"say","type":"log","params":{"message":"queued {{ input.n }}"}}`,
	}, edge("start", "say"))
	doneDef := def([]string{manual,
		`{"block_id":"say","type":"log","params":{"message":"done {{ input.n }}"}}`,
	}, edge("start", "say"))

	// (a) Parked on a sleep: the trigger succeeded (seq 1 began it, 2 ended it), the wait's
	// attempt began at seq 3 and stays running while the wait holds it; the job that took the
	// run there completed. Three state writes: begin start, end start + begin nap, suspend.
	sleeping := wire.NewID(wire.Run)
	jobA := old.job(sleeping, "completed")
	old.run(sleeping, "wf_sleep", sleepDef, `{"n":1}`, "waiting",
		fmt.Sprintf(`{"blocks":{"start":{"status":"succeeded","attempts":1,"output":{"n":1},"job":%d},"nap":{"status":"waiting","attempts":1,"job":%d}}}`, jobA, jobA),
		3, 3, "")
	startA := old.attempt(sleeping, "start", "trigger.manual", 1, "succeeded", `{}`, `{"n":1}`, 2)
	napA := old.attempt(sleeping, "nap", "wait", 1, "running", `{"duration":"3s"}`, "", 3)
	wakeA := old.wait(sleeping, "nap", "sleep", "", 2*time.Second, napA)

	// (b) Parked on a signal wait, the same way.
	signalled := wire.NewID(wire.Run)
	jobB := old.job(signalled, "completed")
	old.run(signalled, "wf_signal", signalDef, `{"n":2}`, "waiting",
		fmt.Sprintf(`{"blocks":{"start":{"status":"succeeded","attempts":1,"output":{"n":2},"job":%d},"hold":{"status":"waiting","attempts":1,"job":%d}}}`, jobB, jobB),
		3, 3, "")
	startB := old.attempt(signalled, "start", "trigger.manual", 1, "succeeded", `{}`, `{"n":2}`, 2)
	holdB := old.attempt(signalled, "hold", "wait", 1, "running", `{"signal":"go"}`, "", 3)
	old.wait(signalled, "hold", "signal", "go", 0, holdB)

	// (c) A step in flight on the old replica when it stopped: its job still running there.
	// Two state writes: begin start, end start + begin work.
	inFlight := wire.NewID(wire.Run)
	jobC := old.job(inFlight, "running")
	old.run(inFlight, "wf_inflight", inFlightDef, `{"n":3}`, "running",
		fmt.Sprintf(`{"blocks":{"start":{"status":"succeeded","attempts":1,"output":{"n":3},"job":%d},"work":{"status":"running","attempts":1,"job":%d}}}`, jobC, jobC),
		3, 2, "")
	old.attempt(inFlight, "start", "trigger.manual", 1, "succeeded", `{}`, `{"n":3}`, 2)
	workC := old.attempt(inFlight, "work", "log", 1, "running", `{"message":"work 3"}`, "", 3)

	// (d) Queued, never started: the state as dispatch stored it, its job available.
	queued := wire.NewID(wire.Run)
	old.run(queued, "wf_queued", queuedDef, `{"n":4}`, "queued", `{}`, 0, 0, "")
	old.job(queued, "available")

	// (e) Completed: both blocks succeeded (seq 2 and 4), three state writes, its waits gone.
	done := wire.NewID(wire.Run)
	jobE := old.job(done, "completed")
	old.run(done, "wf_done", doneDef, `{"n":5}`, "completed",
		fmt.Sprintf(`{"blocks":{"start":{"status":"succeeded","attempts":1,"output":{"n":5},"job":%d},"say":{"status":"succeeded","attempts":1,"output":{"message":"done 5"},"job":%d}}}`, jobE, jobE),
		4, 3, `{"say":{"message":"done 5"}}`)
	startE := old.attempt(done, "start", "trigger.manual", 1, "succeeded", `{}`, `{"n":5}`, 2)
	sayE := old.attempt(done, "say", "log", 1, "succeeded", `{"message":"done 5"}`, `{"message":"done 5"}`, 4)
	var finishedE, updatedE time.Time
	require.NoError(t, pool.QueryRow(ctx, `SELECT finished_at, updated_at FROM orchestrator.runs WHERE id = $1`, done).Scan(&finishedE, &updatedE))

	// The new version starts on this database and applies 0007 itself. The old replica has no
	// row in replicas: it is dead to the sweeper at once, which looks every 20 ms.
	sys := startWith(t, func(c *service.Config) {
		c.Base.DatabaseURL = url
		c.Heartbeat = 200 * time.Millisecond
		c.DeadAfter = 5 * time.Second
		c.SweepEvery = 20 * time.Millisecond
	})
	b.sys = sys
	b.workflow(t, "wf_sleep", 1, sleepDef)
	b.workflow(t, "wf_signal", 1, signalDef)
	b.workflow(t, "wf_inflight", 1, inFlightDef)
	b.workflow(t, "wf_queued", 1, queuedDef)
	b.workflow(t, "wf_done", 1, doneDef)

	// 0007 applied (and every migration after it), by the service's own start-up, and
	// runs.state is gone.
	var applied bool
	require.NoError(t, pool.QueryRow(ctx, `SELECT bool_or(version_id = 7) FROM orchestrator.goose_db_version WHERE is_applied`).Scan(&applied))
	require.True(t, applied)
	var stateColumns int
	require.NoError(t, pool.QueryRow(ctx, `SELECT count(*) FROM information_schema.columns
		WHERE table_schema = 'orchestrator' AND table_name = 'runs' AND column_name = 'state'`).Scan(&stateColumns))
	require.Zero(t, stateColumns, "runs.state is dropped")

	// The moved blocks, as 0007 wrote them (rev: the run's state_rev). Only the runs the engine
	// has no reason to touch yet are read as moved: (b) waits for a signal the test has not
	// sent, (e) is over.
	hold := readMovedBlock(t, pool, signalled, "hold")
	require.Equal(t, "waiting", hold.Status)
	require.Equal(t, 1, hold.Attempts)
	require.Equal(t, jobB, hold.Job)
	require.Equal(t, textPtr(holdB), hold.AttemptID)
	require.True(t, hold.InFlight, "the wait's attempt is in flight")
	require.Equal(t, "signal", hold.Wait["kind"])
	require.Equal(t, "go", hold.Wait["signal"])
	require.NotContains(t, hold.Wait, "wake_at", "a signal wait without timeout has no wake time")
	require.NotEmpty(t, hold.Wait["since"])
	require.Nil(t, hold.Output)
	require.EqualValues(t, 3, hold.Rev)
	require.Equal(t, movedBlock{Status: "succeeded", Attempts: 1, Job: jobB, AttemptID: textPtr(startB), Output: map[string]any{"n": float64(2)}, Rev: 3},
		readMovedBlock(t, pool, signalled, "start"))
	// (e) is over: 0007 moved its blocks and 0015, applied after it, removed them (a finished
	// run keeps no block rows).
	var blocksOfDone int
	require.NoError(t, pool.QueryRow(ctx, `SELECT count(*) FROM orchestrator.run_blocks WHERE run_id = $1`, done).Scan(&blocksOfDone))
	require.Zero(t, blocksOfDone)
	var waitsOfDone int
	require.NoError(t, pool.QueryRow(ctx, `SELECT count(*) FROM orchestrator.waits WHERE run_id = $1`, done).Scan(&waitsOfDone))
	require.Zero(t, waitsOfDone)

	// (a)'s sleep: its row is the moved one as long as the wake has not come (a statement whose
	// clock reads before wake_at has a snapshot from before any wake committed). The sleep
	// ends 2 s after it was written, so this holds unless the start-up took that long.
	var (
		nap      movedBlock
		wait     []byte
		napWake  time.Time
		napSince time.Time
		napFirst bool
	)
	require.NoError(t, pool.QueryRow(ctx, `SELECT status, attempts, job, attempt_id, in_flight, wait, rev,
			(wait->>'wake_at')::timestamptz, (wait->>'since')::timestamptz, clock_timestamp() < $2
		FROM orchestrator.run_blocks WHERE run_id = $1 AND block_id = 'nap'`, sleeping, wakeA).
		Scan(&nap.Status, &nap.Attempts, &nap.Job, &nap.AttemptID, &nap.InFlight, &wait, &nap.Rev, &napWake, &napSince, &napFirst))
	if napFirst {
		require.NoError(t, json.Unmarshal(wait, &nap.Wait))
		require.Equal(t, "waiting", nap.Status)
		require.Equal(t, 1, nap.Attempts)
		require.Equal(t, jobA, nap.Job)
		require.Equal(t, textPtr(napA), nap.AttemptID)
		require.True(t, nap.InFlight, "the sleep's attempt is in flight")
		require.Equal(t, "sleep", nap.Wait["kind"])
		require.True(t, napWake.Equal(wakeA), "wake_at %s moved as %s", wakeA, napWake)
		require.Equal(t, 3*time.Second, napWake.Sub(napSince), "since is when the wait began")
		require.EqualValues(t, 3, nap.Rev)
	} else {
		t.Logf("the sleep of %s ended before its moved row could be read; its end is checked below", sleeping)
	}

	// (b) is still parked on its signal; the signal reaches it through the API.
	got := b.do(t, "GET", "/api/runs/"+signalled, nil)
	require.Equal(t, "waiting", got.Body["status"], got.Raw)
	require.Equal(t, map[string]any{"block_id": "hold", "kind": "signal", "signal": "go"}, got.Body["waiting"])
	r := b.do(t, "POST", "/api/runs/"+signalled+"/signals", map[string]any{"name": "go", "payload": map[string]any{"word": "hello"}})
	require.Equal(t, http.StatusAccepted, r.Status, r.Raw)
	require.Equal(t, true, r.Body["delivered"], r.Raw)

	// Every run that was going finishes, with the outputs the templates make from the moved
	// outputs.
	require.Equal(t, map[string]any{"say": map[string]any{"message": "after the nap, n is 1"}}, b.waitStatus(t, sleeping, "completed")["output"])
	require.Equal(t, map[string]any{"say": map[string]any{"message": "got hello for 2"}}, b.waitStatus(t, signalled, "completed")["output"])
	require.Equal(t, map[string]any{"done": map[string]any{"message": "done after work 3"}}, b.waitStatus(t, inFlight, "completed")["output"])
	require.Equal(t, map[string]any{"say": map[string]any{"message": "queued 4"}}, b.waitStatus(t, queued, "completed")["output"])
	// (e) stays as it was.
	gotE := b.do(t, "GET", "/api/runs/"+done, nil)
	require.Equal(t, "completed", gotE.Body["status"], gotE.Raw)
	require.Equal(t, map[string]any{"say": map[string]any{"message": "done 5"}}, gotE.Body["output"])
	var (
		finished, updated time.Time
		seqE, revE        int64
	)
	require.NoError(t, pool.QueryRow(ctx, `SELECT finished_at, updated_at, change_seq, state_rev FROM orchestrator.runs WHERE id = $1`, done).
		Scan(&finished, &updated, &seqE, &revE))
	require.True(t, finished.Equal(finishedE) && updated.Equal(updatedE), "the completed run was not written")
	require.Equal(t, [2]int64{4, 3}, [2]int64{seqE, revE})

	// The logs: each attempt once, none left running.
	statuses, logsA := upgradeAttempts(t, b, sleeping)
	require.Equal(t, []string{"start:1:succeeded", "nap:1:succeeded", "say:1:succeeded"}, statuses)
	require.Equal(t, startA, logsA[0]["id"])
	require.Equal(t, napA, logsA[1]["id"], "the sleep's own attempt ended")
	require.GreaterOrEqual(t, logsA[1]["output"].(map[string]any)["slept_ms"], float64(2950), "slept from the wait's start to its wake_at")

	statuses, logsB := upgradeAttempts(t, b, signalled)
	require.Equal(t, []string{"start:1:succeeded", "hold:1:succeeded", "say:1:succeeded"}, statuses)
	require.Equal(t, holdB, logsB[1]["id"])
	require.Equal(t, map[string]any{"signal": map[string]any{"name": "go", "payload": map[string]any{"word": "hello"}}}, logsB[1]["output"])
	var consumedBy *string
	require.NoError(t, pool.QueryRow(ctx, `SELECT consumed_by FROM orchestrator.signals WHERE run_id = $1`, signalled).Scan(&consumedBy))
	require.Equal(t, textPtr(holdB), consumedBy, "the signal is consumed by the moved wait's attempt")

	statuses, logsC := upgradeAttempts(t, b, inFlight)
	require.Equal(t, []string{"start:1:succeeded", "work:1:lost", "work:2:succeeded", "done:1:succeeded"}, statuses)
	require.Equal(t, workC, logsC[1]["id"])
	require.Equal(t, map[string]any{"code": "lost", "message": "replica " + oldReplica + " stopped heartbeating"}, logsC[1]["error"])
	require.NotEmpty(t, logsC[1]["finishedAt"])
	// The run is over, so its block rows (where lost attempts are counted apart) are gone
	// (0015); the attempts above show the lost one beside the one that succeeded.
	var jobCState string
	require.NoError(t, pool.QueryRow(ctx, `SELECT state FROM orchestrator.river_job WHERE id = $1`, jobC).Scan(&jobCState))
	require.Equal(t, "cancelled", jobCState, "the old replica's job is finalized by the sweeper")

	statuses, _ = upgradeAttempts(t, b, queued)
	require.Equal(t, []string{"start:1:succeeded", "say:1:succeeded"}, statuses)

	statuses, logsE := upgradeAttempts(t, b, done)
	require.Equal(t, []string{"start:1:succeeded", "say:1:succeeded"}, statuses)
	require.Equal(t, []any{startE, sayE}, []any{logsE[0]["id"], logsE[1]["id"]})

	// The status log: 0010 logged each run's status as it stood (a queued run's not at all),
	// and the engine logged every change after. The streams replay them in order.
	streamStory := func(id string) []string {
		status, events := b.openStream(t, t.Context(), "/api/runs/"+id+"/events", "")
		require.Equal(t, http.StatusOK, status)
		var out []string
		for e, ok := next(t, events); ok; e, ok = next(t, events) {
			out = append(out, story(e))
		}
		return out
	}
	require.Equal(t, []string{"status queued", "attempt.finished start succeeded", "attempt.finished say succeeded", "status completed"},
		streamStory(done))
	require.Equal(t, []string{"status queued", "attempt.finished start succeeded", "status waiting signal", "attempt.finished hold succeeded",
		"status running", "attempt.started say", "attempt.finished say succeeded", "status completed"}, streamStory(signalled))

	// Nothing is left behind: no wait, no attempt or job still running.
	ids := []string{sleeping, signalled, inFlight, queued, done}
	var waits, running int
	require.NoError(t, pool.QueryRow(ctx, `SELECT count(*) FROM orchestrator.waits WHERE run_id = ANY($1)`, ids).Scan(&waits))
	require.Zero(t, waits)
	require.NoError(t, pool.QueryRow(ctx, `SELECT count(*) FROM orchestrator.step_attempts WHERE run_id = ANY($1) AND status = 'running'`, ids).Scan(&running))
	require.Zero(t, running)
	require.Eventually(t, func() bool {
		var n int
		require.NoError(t, pool.QueryRow(context.Background(), `SELECT count(*) FROM orchestrator.river_job
			WHERE args->>'run_id' = ANY($1) AND state NOT IN ('completed', 'cancelled', 'discarded')`, ids).Scan(&n))
		return n == 0
	}, 10*time.Second, 10*time.Millisecond, "every job of the runs is finished")
}

// States the previous engine could not read (or kept as stored when it failed the run) must
// not stop the upgrade: a run still going with such a state is failed by 0007 with the reason
// and its running attempt failed; a finished one keeps its status; `{"blocks":null}`, which
// the previous engine read as an empty state, still runs.
func TestUpgradeFailsRunsWhoseStateCannotBeRead(t *testing.T) {
	t.Parallel()
	url := testkit.NewDatabase(t)
	migrateToBeforeUpgrade(t, url)
	pool := db(t, url)
	b := &testBundle{org: wire.NewID(wire.Organization)}
	old := &oldEngine{t: t, pool: pool, org: b.org}
	logDef := def([]string{manual, `{"block_id":"say","type":"log","params":{"message":"hi {{ input.n }}"}}`}, edge("start", "say"))

	unreadable := map[string]string{
		"not an object": `"not a state"`,
		"bad attempts":  `{"blocks":{"start":{"status":"running","attempts":"x"}}}`,
		"fraction job":  `{"blocks":{"start":{"status":"running","attempts":1,"job":1.5}}}`,
		"huge lost":     `{"blocks":{"start":{"status":"running","attempts":1,"lost":1e12}}}`,
		"block string":  `{"blocks":{"start":"x"}}`,
	}
	going := map[string]string{}
	for name, state := range unreadable {
		id := wire.NewID(wire.Run)
		old.run(id, "wf_log", logDef, `{"n":1}`, "running", state, 1, 1, "")
		old.attempt(id, "start", "trigger.manual", 1, "running", `{}`, "", 1)
		going[name] = id
	}
	finished := wire.NewID(wire.Run)
	old.run(finished, "wf_log", logDef, `{"n":2}`, "failed", `{"blocks":{"start":{"attempts":"x"}}}`, 0, 1, "")
	nullBlocks := wire.NewID(wire.Run)
	old.run(nullBlocks, "wf_log", logDef, `{"n":3}`, "queued", `{"blocks":null}`, 0, 0, "")
	old.job(nullBlocks, "available")

	sys := startWith(t, func(c *service.Config) { c.Base.DatabaseURL = url })
	b.sys = sys
	b.workflow(t, "wf_log", 1, logDef)

	for name, id := range going {
		got := b.waitStatus(t, id, "failed")
		errBody, _ := got["error"].(map[string]any)
		require.Contains(t, errBody["message"], "could not be read when it moved to per-block storage", name)
		_, attempts := upgradeAttempts(t, b, id)
		require.Len(t, attempts, 1, name)
		require.Equal(t, "failed", attempts[0]["status"], name)
		require.Equal(t, "run_unreadable", attempts[0]["error"].(map[string]any)["code"], name)
	}
	require.Equal(t, "failed", b.waitStatus(t, finished, "failed")["status"])
	got := b.waitStatus(t, nullBlocks, "completed")
	require.Equal(t, map[string]any{"say": map[string]any{"message": "hi 3"}}, got["output"])
}
