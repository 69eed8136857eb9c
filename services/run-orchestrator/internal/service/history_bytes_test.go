package service_test

import (
	"testing"

	"github.com/stretchr/testify/require"

	"svc.dev/libs/testkit"
	"svc.dev/libs/wire"
)

// Migration 0015 moves existing runs in place: each distinct definition is stored once in
// run_definitions and every run reads back exactly its own; finished runs lose their block rows,
// runs in progress keep theirs. Down puts every definition back on its run and rebuilds the
// block rows of finished runs from their attempts.
func TestHistoryBytesMigrationMovesRunsInPlace(t *testing.T) {
	t.Parallel()
	ctx := t.Context()
	pool, provider := migrationProvider(t, testkit.NewDatabase(t), "migration-test")
	_, err := provider.UpTo(ctx, 13)
	require.NoError(t, err)

	org, other := wire.NewID(wire.Organization), wire.NewID(wire.Organization)
	defA := `{"blocks": [{"block_id": "start", "type": "trigger.manual"}], "edges": []}`
	defB := `{"blocks": [{"block_id": "start", "type": "trigger.manual"}, {"block_id": "say", "type": "log"}], "edges": []}`
	type fixture struct{ id, org, wf, def, status string }
	runs := []fixture{
		{wire.NewID(wire.Run), org, "wf_a", defA, "completed"},
		{wire.NewID(wire.Run), org, "wf_a", defA, "failed"},
		{wire.NewID(wire.Run), org, "wf_a", defB, "running"}, // another document under the same workflow
		{wire.NewID(wire.Run), org, "wf_b", defA, "cancelled"},
		{wire.NewID(wire.Run), other, "wf_a", defA, "waiting"},
	}
	for _, r := range runs {
		_, err := pool.Exec(ctx, `INSERT INTO runs (id, organization_id, workflow_id, workflow_version, definition, status, trigger, state_rev)
			VALUES ($1, $2, $3, 1, $4::jsonb, $5, '{"kind":"manual"}', 4)`, r.id, r.org, r.wf, r.def, r.status)
		require.NoError(t, err)
		_, err = pool.Exec(ctx, `INSERT INTO step_attempts (id, run_id, block_id, type, attempt, status, output, replica, seq, started_at, finished_at)
			VALUES ($1, $2, 'start', 'trigger.manual', 1, 'failed', NULL, 'r', 1, now(), now()),
			       ($3, $2, 'start', 'trigger.manual', 2, 'succeeded', '{"n": 1}', 'r', 2, now(), now())`,
			wire.NewID(wire.Attempt), r.id, wire.NewID(wire.Attempt))
		require.NoError(t, err)
		_, err = pool.Exec(ctx, `INSERT INTO run_blocks (run_id, block_id, status, attempts, output, rev)
			VALUES ($1, 'start', 'succeeded', 2, '{"n": 1}', 4)`, r.id)
		require.NoError(t, err)
	}

	_, err = provider.UpTo(ctx, 15)
	require.NoError(t, err)
	var defs, blockRows int
	require.NoError(t, pool.QueryRow(ctx, `SELECT count(*) FROM run_definitions`).Scan(&defs))
	require.Equal(t, 4, defs, "one row per organization, workflow and document")
	for _, r := range runs {
		var same bool
		require.NoError(t, pool.QueryRow(ctx, `SELECT d.definition = $2::jsonb FROM runs r
			JOIN run_definitions d ON d.organization_id = r.organization_id AND d.workflow_id = r.workflow_id AND d.hash = r.definition_hash
			WHERE r.id = $1`, r.id, r.def).Scan(&same))
		require.True(t, same, "run %s reads back its own definition", r.id)
		require.NoError(t, pool.QueryRow(ctx, `SELECT count(*) FROM run_blocks WHERE run_id = $1`, r.id).Scan(&blockRows))
		if r.status == "running" || r.status == "waiting" {
			require.Equal(t, 1, blockRows, "a run in progress keeps its blocks")
		} else {
			require.Zero(t, blockRows, "a finished run keeps no blocks")
		}
	}
	// Deleting a run still takes everything that is its own with it, and leaves the shared
	// definition to the others.
	_, err = pool.Exec(ctx, `DELETE FROM runs WHERE id = $1`, runs[0].id)
	require.NoError(t, err)
	var left int
	require.NoError(t, pool.QueryRow(ctx, `SELECT count(*) FROM step_attempts WHERE run_id = $1`, runs[0].id).Scan(&left))
	require.Zero(t, left)
	require.NoError(t, pool.QueryRow(ctx, `SELECT count(*) FROM run_definitions`).Scan(&defs))
	require.Equal(t, 4, defs)

	_, err = provider.DownTo(ctx, 13)
	require.NoError(t, err)
	for _, r := range runs[1:] {
		var same bool
		require.NoError(t, pool.QueryRow(ctx, `SELECT definition = $2::jsonb FROM runs WHERE id = $1`, r.id, r.def).Scan(&same))
		require.True(t, same, "down: run %s has its definition back", r.id)
		var status string
		var attempts int
		var output *string
		require.NoError(t, pool.QueryRow(ctx, `SELECT status, attempts, output::text FROM run_blocks WHERE run_id = $1 AND block_id = 'start'`, r.id).
			Scan(&status, &attempts, &output))
		require.Equal(t, "succeeded", status)
		require.Equal(t, 2, attempts)
		require.NotNil(t, output)
		require.JSONEq(t, `{"n": 1}`, *output)
	}
	var tables int
	require.NoError(t, pool.QueryRow(ctx, `SELECT count(*) FROM information_schema.tables WHERE table_schema = $1 AND table_name = 'run_definitions'`,
		upgradeSchema).Scan(&tables))
	require.Zero(t, tables)
}
