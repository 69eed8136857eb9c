package service_test

import (
	"log/slog"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"

	"svc.dev/libs/testkit"
)

// logCount counts the occurrences of s in what the service logged to logs.
func logCount(logs *testkit.SyncBuffer, s string) int {
	return strings.Count(logs.String(), s)
}

// TestRunsEndedAtDispatch: a run whose blocks are all triggers, transforms, logs and
// conditions ends in its dispatch transaction, recorded as a job would have recorded it
// (every attempt, the branch not taken skipped, the status log, the output), with no job left
// for it, and its log lines written once. Runs that need a job (an attempt that fails, an
// http.request, more blocks than one transaction carries) still get one and end the usual
// way, their log lines written once too.
func TestRunsEndedAtDispatch(t *testing.T) {
	t.Parallel()
	logs := &testkit.SyncBuffer{}
	sys := startLogging(t, nil, slog.New(slog.NewJSONHandler(logs, &slog.HandlerOptions{Level: slog.LevelInfo})))
	pool := db(t, sys.dbURL)
	b := sys.setup(t)
	jobs := func(id string) int {
		var n int
		require.NoError(t, pool.QueryRow(t.Context(), `SELECT count(*) FROM orchestrator.river_job WHERE args->>'run_id' = $1`, id).Scan(&n))
		return n
	}
	statuses := func(id string) []string {
		var out []string
		require.NoError(t, pool.QueryRow(t.Context(), `SELECT coalesce(array_agg(status ORDER BY seq), '{}') FROM orchestrator.run_statuses WHERE run_id = $1`, id).Scan(&out))
		return out
	}

	b.workflow(t, "wf_branch", 1, def([]string{manual,
		`{"block_id":"shape","type":"transform","params":{"value":{"n":"{{ input.n }}","doubled":"{{ input.n * 2 }}"}}}`,
		`{"block_id":"check","type":"condition","params":{"expression":"input.n > 2"}}`,
		`{"block_id":"big","type":"log","params":{"message":"dispatch-end big {{ run.id }}"}}`,
		`{"block_id":"small","type":"log","params":{"message":"dispatch-end small {{ run.id }}"}}`,
	}, edge("start", "shape"), edge("shape", "check"),
		`{"block_id":"check","target_block_id":"big","branch":"true"}`,
		`{"block_id":"check","target_block_id":"small","branch":"false"}`))
	id := b.startRun(t, "wf_branch", map[string]any{"input": map[string]any{"n": 3}})
	// No wait: the 202 came after the commit that ended it.
	got := b.do(t, "GET", "/api/runs/"+id, nil).Body
	require.Equal(t, "completed", got["status"], "%v", got)
	require.NotEmpty(t, got["startedAt"])
	require.NotEmpty(t, got["finishedAt"])
	require.Equal(t, map[string]any{"message": "dispatch-end big " + id}, got["output"].(map[string]any)["big"])
	require.Zero(t, jobs(id), "no job for a run ended at its dispatch")
	require.Equal(t, []string{"running", "completed"}, statuses(id))
	attempts := b.logs(t, id)
	var seen []string
	for _, a := range attempts {
		require.Equal(t, "succeeded", a["status"], "%v", a)
		seen = append(seen, a["block_id"].(string))
	}
	require.Equal(t, []string{"start", "shape", "check", "big"}, seen, "the branch not taken has no attempt")
	require.Equal(t, map[string]any{"n": 3.0, "doubled": 6.0}, attempts[1]["output"])
	require.Equal(t, 1, logCount(logs, "dispatch-end big "+id), "the log line is written once")
	// The run's row is inserted as the run ended, in the transaction of its attempts, with the
	// revision, change sequence and status time the update it replaces wrote.
	var (
		rev, changeSeq, lastSeq int64
		sameTx, statusAtSet     bool
	)
	require.NoError(t, pool.QueryRow(t.Context(), `SELECT r.state_rev, r.change_seq,
			greatest((SELECT max(seq) FROM orchestrator.step_attempts a WHERE a.run_id = r.id),
				(SELECT max(seq) FROM orchestrator.run_statuses s WHERE s.run_id = r.id)),
			r.xmin::text = ALL (SELECT xmin::text FROM orchestrator.step_attempts a WHERE a.run_id = r.id),
			r.status_at = r.created_at AND r.started_at = r.created_at AND r.finished_at = r.created_at
		FROM orchestrator.runs r WHERE r.id = $1`, id).Scan(&rev, &changeSeq, &lastSeq, &sameTx, &statusAtSet))
	require.Equal(t, int64(1), rev)
	require.Equal(t, lastSeq, changeSeq)
	require.True(t, sameTx, "the row and the attempts were written by one transaction")
	require.True(t, statusAtSet, "status, start and finish times are the dispatch transaction's")
	require.Zero(t, logCount(logs, "dispatch-end small "+id))

	// A failing block: the run goes to a job, which fails it by the connector's policy; the
	// log line before it (run in memory at the dispatch, then by the job) is written once.
	b.workflow(t, "wf_fails", 1, def([]string{manual,
		`{"block_id":"say","type":"log","params":{"message":"dispatch-fail {{ run.id }}"}}`,
		`{"block_id":"bad","type":"transform","params":{"value":"{{ input.missing.deeper }}"}}`,
	}, edge("start", "say"), edge("say", "bad")))
	failing := b.startRun(t, "wf_fails", nil)
	b.waitStatus(t, failing, "failed")
	require.Equal(t, 1, jobs(failing), "a run that fails at its dispatch's try goes to a job")
	require.Equal(t, 1, logCount(logs, "dispatch-fail "+failing), "the log line is written once")

	// More blocks than one transaction carries: a job runs the chain.
	b.workflow(t, "wf_long", 1, chainDef(21))
	long := b.startRun(t, "wf_long", nil)
	b.waitStatus(t, long, "completed")
	require.Equal(t, 1, jobs(long))
	require.Len(t, b.logs(t, long), 21)
}
