package service_test

import (
	"context"
	"fmt"
	"net/http"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/stretchr/testify/require"

	"svc.dev/libs/internalauth"
	"svc.dev/libs/wire"
	"svc.dev/services/run-orchestrator/internal/service"
)

// retentionConfig keeps finished runs an hour and sweeps only when a test says so (the
// background sweep's first turn is at least half an interval away).
func retentionConfig(c *service.Config) {
	c.Retention = time.Hour
	c.RetentionSweepEvery = 2 * time.Hour
	c.RetentionSweepBatch = 1000
}

var (
	logOnly    = def([]string{manual, `{"block_id":"done","type":"log","params":{"message":"done"}}`}, edge("start", "done"))
	waitSignal = def([]string{manual, `{"block_id":"hold","type":"wait","params":{"signal":"go"}}`,
		`{"block_id":"after","type":"log","params":{"message":"after"}}`}, edge("start", "hold"), edge("hold", "after"))
)

// finishedAgo backdates a run's end (and its creation before it).
func finishedAgo(t *testing.T, pool *pgxpool.Pool, runID string, ago time.Duration) {
	t.Helper()
	tag, err := pool.Exec(t.Context(), `UPDATE orchestrator.runs SET finished_at = now() - make_interval(secs => $2),
		created_at = now() - make_interval(secs => $2) - interval '1 second' WHERE id = $1`, runID, ago.Seconds())
	require.NoError(t, err)
	require.EqualValues(t, 1, tag.RowsAffected())
}

// owned counts the rows of each table that belong to the runs.
func owned(t *testing.T, pool *pgxpool.Pool, runIDs []string) map[string]int {
	t.Helper()
	out := map[string]int{}
	for _, table := range []string{"runs", "step_attempts", "run_statuses", "run_blocks", "waits", "signals", "idempotency_keys"} {
		col := "run_id"
		if table == "runs" {
			col = "id"
		}
		var n int
		require.NoError(t, pool.QueryRow(t.Context(), `SELECT count(*) FROM orchestrator.`+table+` WHERE `+col+` = ANY($1)`, runIDs).Scan(&n))
		out[table] = n
	}
	return out
}

// TestRetentionDeletesFinishedRunsPastTheirPeriod: a sweep deletes exactly the finished runs
// older than their organization's period (the server's, or the organization's shorter one),
// with everything they own, and never a run still going, however old. A deleted run and its
// logs answer 404.
func TestRetentionDeletesFinishedRunsPastTheirPeriod(t *testing.T) {
	t.Parallel()
	sys := startWith(t, retentionConfig)
	pool := db(t, sys.dbURL)
	a, b := sys.setup(t), sys.setup(t) // a keeps the server's hour, b sets 10 minutes
	for _, o := range []*testBundle{a, b} {
		o.workflow(t, "wf_done", 1, logOnly)
		o.workflow(t, "wf_wait", 1, waitSignal)
	}
	r := b.doWith(t, internalauth.Identity{UserID: "usr_owner", OrganizationID: b.org, AuthMode: internalauth.ModeSession, Role: "owner"},
		"PUT", "/api/organizations/"+b.org+"/retention", map[string]any{"runRetention": "10m"})
	require.Equal(t, http.StatusOK, r.Status, r.Raw)

	finished := func(o *testBundle, key string) string {
		id := o.startRun(t, "wf_done", map[string]any{"idempotencyKey": key})
		o.waitStatus(t, id, "completed")
		return id
	}
	waiting := func(o *testBundle) string {
		id := o.startRun(t, "wf_wait", nil)
		o.waitStatus(t, id, "waiting")
		return id
	}
	cancelled := func(o *testBundle) string {
		id := waiting(o)
		// A signal that no wait consumed stays with its run; the cascade must take it too.
		require.Equal(t, http.StatusAccepted, o.do(t, "POST", "/api/runs/"+id+"/signals", map[string]any{"name": "never"}).Status)
		require.Equal(t, http.StatusAccepted, o.do(t, "POST", "/api/runs/"+id+"/cancel", nil).Status)
		o.waitStatus(t, id, "cancelled")
		return id
	}
	aOld, aRecent := finished(a, "a-old"), finished(a, "a-recent")
	aOldCancelled := cancelled(a)
	aOldWaiting := waiting(a)
	bPast, bWithin := finished(b, "b-past"), finished(b, "b-within")
	bPastCancelled := cancelled(b)
	bOldWaiting := waiting(b)
	finishedAgo(t, pool, aOld, 2*time.Hour)
	finishedAgo(t, pool, aOldCancelled, 61*time.Minute)
	finishedAgo(t, pool, aRecent, 59*time.Minute)
	finishedAgo(t, pool, bPast, 11*time.Minute)
	finishedAgo(t, pool, bPastCancelled, 20*time.Minute)
	finishedAgo(t, pool, bWithin, 9*time.Minute)
	// Runs still waiting are never deleted, whatever their age (even with an end time set).
	finishedAgo(t, pool, aOldWaiting, 1000*time.Hour)
	finishedAgo(t, pool, bOldWaiting, 1000*time.Hour)

	gone := []string{aOld, aOldCancelled, bPast, bPastCancelled}
	before := owned(t, pool, gone)
	require.Equal(t, 4, before["runs"])
	require.Positive(t, before["step_attempts"])
	require.Positive(t, before["run_statuses"])
	require.Equal(t, 2, before["signals"])
	require.Equal(t, 2, before["idempotency_keys"])

	res, err := sys.app.SweepRetention(t.Context())
	require.NoError(t, err)
	require.Equal(t, len(gone), res.Deleted, "exactly the finished runs past their period")
	require.True(t, res.CaughtUp)
	for table, n := range owned(t, pool, gone) {
		require.Zero(t, n, "%s rows of deleted runs are left", table)
	}

	for _, c := range []struct {
		o  *testBundle
		id string
	}{{a, aOld}, {a, aOldCancelled}, {b, bPast}, {b, bPastCancelled}} {
		r := c.o.do(t, "GET", "/api/runs/"+c.id, nil)
		require.Equal(t, http.StatusNotFound, r.Status, r.Raw)
		require.Equal(t, "not_found", r.Body["error"])
		r = c.o.do(t, "GET", "/api/runs/"+c.id+"/logs", nil)
		require.Equal(t, http.StatusNotFound, r.Status, r.Raw)
	}
	for _, c := range []struct {
		o      *testBundle
		id, st string
	}{{a, aRecent, "completed"}, {a, aOldWaiting, "waiting"}, {b, bWithin, "completed"}, {b, bOldWaiting, "waiting"}} {
		r := c.o.do(t, "GET", "/api/runs/"+c.id, nil)
		require.Equal(t, http.StatusOK, r.Status, r.Raw)
		require.Equal(t, c.st, r.Body["status"])
		require.NotEmpty(t, c.o.logs(t, c.id))
	}
	// The old waiting runs go on as if nothing happened.
	for _, c := range []struct {
		o  *testBundle
		id string
	}{{a, aOldWaiting}, {b, bOldWaiting}} {
		require.Equal(t, http.StatusAccepted, c.o.do(t, "POST", "/api/runs/"+c.id+"/signals", map[string]any{"name": "go"}).Status)
		c.o.waitStatus(t, c.id, "completed")
	}
	// An idempotency key of a deleted run no longer answers with it.
	again := a.startRun(t, "wf_done", map[string]any{"idempotencyKey": "a-old"})
	require.NotEqual(t, aOld, again)

	// A second sweep finds nothing more; the definitions of workflows with runs left stay.
	res, err = sys.app.SweepRetention(t.Context())
	require.NoError(t, err)
	require.Zero(t, res.Deleted)
	var defs int
	require.NoError(t, pool.QueryRow(t.Context(), `SELECT count(*) FROM orchestrator.run_definitions WHERE organization_id = ANY($1)`,
		[]string{a.org, b.org}).Scan(&defs))
	require.Equal(t, 4, defs)
}

// TestRetentionRemovesDefinitionsWithTheirLastRun: a workflow's stored definition goes when
// the last run that names it is deleted, and a later run of it stores it again.
func TestRetentionRemovesDefinitionsWithTheirLastRun(t *testing.T) {
	t.Parallel()
	sys := startWith(t, retentionConfig)
	pool := db(t, sys.dbURL)
	o := sys.setup(t)
	o.workflow(t, "wf_done", 1, logOnly)
	id := o.startRun(t, "wf_done", nil)
	o.waitStatus(t, id, "completed")
	finishedAgo(t, pool, id, 2*time.Hour)
	count := func() int {
		var n int
		require.NoError(t, pool.QueryRow(t.Context(), `SELECT count(*) FROM orchestrator.run_definitions WHERE organization_id = $1`, o.org).Scan(&n))
		return n
	}
	require.Equal(t, 1, count())
	res, err := sys.app.SweepRetention(t.Context())
	require.NoError(t, err)
	require.Equal(t, 1, res.Deleted)
	require.Equal(t, 1, res.Definitions)
	require.Zero(t, count())

	again := o.startRun(t, "wf_done", nil)
	o.waitStatus(t, again, "completed")
	r := o.do(t, "GET", "/api/runs/"+again+"?include=workflow", nil)
	require.Equal(t, http.StatusOK, r.Status, r.Raw)
	require.NotNil(t, r.Body["workflow"].(map[string]any)["definition"])
	require.Equal(t, 1, count())
}

// TestRetentionSettingIsTheOrganizations: any member reads the setting, owners, admins and
// API keys change it, members may not; the period is checked; another organization's id is
// 404 whether it exists or not; "current" names the caller's.
func TestRetentionSettingIsTheOrganizations(t *testing.T) {
	t.Parallel()
	sys := startWith(t, retentionConfig)
	a, other := sys.setup(t), sys.setup(t)
	as := func(mode internalauth.AuthMode, role string) internalauth.Identity {
		id := internalauth.Identity{UserID: "usr_x", OrganizationID: a.org, AuthMode: mode, Role: role}
		if mode == internalauth.ModeAPIKey {
			id.APIKeyID, id.Role = "key_x", ""
		}
		return id
	}
	owner, admin, member, key := as(internalauth.ModeSession, "owner"), as(internalauth.ModeSession, "admin"),
		as(internalauth.ModeSession, "member"), as(internalauth.ModeAPIKey, "")
	path := "/api/organizations/" + a.org + "/retention"

	r := a.doWith(t, member, "GET", path, nil)
	require.Equal(t, http.StatusOK, r.Status, r.Raw)
	require.Equal(t, map[string]any{"organizationId": a.org, "runRetention": nil, "serverRetention": "1h",
		"effectiveRetention": "1h", "effectiveRetentionSeconds": float64(3600), "updatedAt": nil}, r.Body)

	r = a.doWith(t, member, "PUT", path, map[string]any{"runRetention": "10m"})
	require.Equal(t, http.StatusForbidden, r.Status, r.Raw)
	require.Equal(t, "forbidden", r.Body["error"])

	for _, who := range []internalauth.Identity{owner, admin, key} {
		r = a.doWith(t, who, "PUT", path, map[string]any{"runRetention": "30m"})
		require.Equal(t, http.StatusOK, r.Status, r.Raw)
		require.Equal(t, "30m", r.Body["runRetention"])
		require.Equal(t, "30m", r.Body["effectiveRetention"])
		require.NotNil(t, r.Body["updatedAt"])
	}
	r = a.doWith(t, member, "GET", "/api/organizations/current/retention", nil)
	require.Equal(t, http.StatusOK, r.Status, r.Raw)
	require.Equal(t, "30m", r.Body["runRetention"])
	require.Equal(t, a.org, r.Body["organizationId"])

	for body, msg := range map[string]string{
		`{"runRetention":"2h"}`:   "at most the server's period, 1h",
		`{"runRetention":"30s"}`:  "at least 1m",
		`{"runRetention":"soon"}`: "not a duration",
		`{"runRetention":5}`:      "must be a string",
		`{}`:                      "runRetention is required",
	} {
		r = a.doWith(t, owner, "PUT", path, rawBody(body))
		require.Equal(t, http.StatusBadRequest, r.Status, body+": "+r.Raw)
		require.Equal(t, "invalid_body", r.Body["error"], body)
		require.Contains(t, r.Raw, msg, body)
		require.Contains(t, r.Raw, `"path":"/runRetention"`, body)
	}
	r = a.doWith(t, owner, "PUT", path, rawBody(`{"runRetention":"30m","extra":1}`))
	require.Equal(t, http.StatusBadRequest, r.Status, r.Raw)

	// Another organization, existing (it has a setting) or not: 404 for reads and writes,
	// and its setting is untouched.
	otherOwner := internalauth.Identity{UserID: "usr_y", OrganizationID: other.org, AuthMode: internalauth.ModeSession, Role: "owner"}
	r = other.doWith(t, otherOwner, "PUT", "/api/organizations/"+other.org+"/retention", map[string]any{"runRetention": "45m"})
	require.Equal(t, http.StatusOK, r.Status, r.Raw)
	for _, target := range []string{other.org, wire.NewID(wire.Organization), "org_nope"} {
		for _, method := range []string{"GET", "PUT"} {
			r = a.doWith(t, owner, method, "/api/organizations/"+target+"/retention", map[string]any{"runRetention": "5m"})
			require.Equal(t, http.StatusNotFound, r.Status, method+" "+target+": "+r.Raw)
			require.Equal(t, "not_found", r.Body["error"])
		}
	}
	r = other.doWith(t, otherOwner, "GET", "/api/organizations/current/retention", nil)
	require.Equal(t, "45m", r.Body["runRetention"])

	r = a.doWith(t, owner, "PUT", path, rawBody(`{"runRetention":null}`))
	require.Equal(t, http.StatusOK, r.Status, r.Raw)
	require.Nil(t, r.Body["runRetention"])
	require.Equal(t, "1h", r.Body["effectiveRetention"])
}

// cloneRuns copies a finished run n times (the run with its attempts, statuses and, for
// every clone, a signal and an idempotency key), finished ago, and returns the clones' ids.
func cloneRuns(t *testing.T, pool *pgxpool.Pool, runID, prefix string, n int, ago time.Duration) []string {
	t.Helper()
	ctx := t.Context()
	// Copies through temporary tables, so that every column (whatever the schema holds by
	// now) is copied as it is, JSON nulls included.
	tx, err := pool.Begin(ctx)
	require.NoError(t, err)
	defer func() { _ = tx.Rollback(ctx) }()
	for _, c := range []struct{ table, key, set string }{
		{"runs", "id", `id = $1 || g, finished_at = now() - make_interval(secs => $2), created_at = now() - make_interval(secs => $2 + 1)`},
		{"step_attempts", "run_id", `run_id = $1 || g, id = 'att_' || $1 || g || '_' || id`},
		{"run_statuses", "run_id", `run_id = $1 || g`},
	} {
		for _, q := range []struct {
			sql  string
			args []any
		}{
			{`CREATE TEMPORARY TABLE clone ON COMMIT DROP AS SELECT o.*, g FROM orchestrator.` + c.table + ` o, generate_series(1, $2) g WHERE o.` + c.key + ` = $1`, []any{runID, n}},
			{`UPDATE clone SET ` + c.set, []any{prefix, ago.Seconds()}},
			{`ALTER TABLE clone DROP COLUMN g`, nil},
			{`INSERT INTO orchestrator.` + c.table + ` SELECT * FROM clone`, nil},
			{`DROP TABLE clone`, nil},
		} {
			args := q.args
			if c.table != "runs" && len(args) == 2 && args[0] == prefix {
				args = args[:1]
			}
			_, err := tx.Exec(ctx, q.sql, args...)
			require.NoError(t, err, q.sql)
		}
	}
	require.NoError(t, tx.Commit(ctx))
	_, err = pool.Exec(ctx, `INSERT INTO orchestrator.signals (id, run_id, name) SELECT 'sig_' || $1 || g, $1 || g, 'left' FROM generate_series(1, $2) g`, prefix, n)
	require.NoError(t, err)
	_, err = pool.Exec(ctx, `INSERT INTO orchestrator.idempotency_keys (organization_id, key, run_id)
		SELECT organization_id, 'k-' || $2 || g, $2 || g FROM orchestrator.runs, generate_series(1, $3) g WHERE id = $1`, runID, prefix, n)
	require.NoError(t, err)
	ids := make([]string, n)
	for i := range ids {
		ids[i] = fmt.Sprintf("%s%d", prefix, i+1)
	}
	return ids
}

// TestConcurrentSweepsDeleteEachRunOnce: two replicas sweeping the same database at once,
// in small batches, delete every expired run exactly once between them; starts go on and
// finish meanwhile; and a sweep holding its batch's locks (a transaction left open mid-delete)
// holds back neither a start nor the other replica's sweep, which takes other runs.
func TestConcurrentSweepsDeleteEachRunOnce(t *testing.T) {
	t.Parallel()
	small := func(c *service.Config) { retentionConfig(c); c.RetentionSweepBatch = 50 }
	one := startWith(t, small)
	two := startWith(t, func(c *service.Config) { small(c); c.Base.DatabaseURL = one.dbURL })
	pool := db(t, one.dbURL)
	o := one.setup(t)
	o.workflow(t, "wf_done", 1, logOnly)
	onTwo := &testBundle{sys: two, org: o.org}
	onTwo.workflow(t, "wf_done", 1, logOnly)
	seed := o.startRun(t, "wf_done", nil)
	o.waitStatus(t, seed, "completed")

	const n = 2000
	expired := cloneRuns(t, pool, seed, "run_sweep", n, 2*time.Hour)
	held := cloneRuns(t, pool, seed, "run_held", 20, 2*time.Hour)

	// A sweep stopped mid-batch: its delete done, not committed.
	tx, err := pool.Begin(t.Context())
	require.NoError(t, err)
	tag, err := tx.Exec(t.Context(), `DELETE FROM orchestrator.runs WHERE id = ANY($1)`, held)
	require.NoError(t, err)
	require.EqualValues(t, len(held), tag.RowsAffected())

	var deleted atomic.Int64
	var wg sync.WaitGroup
	sweepErrs := make(chan error, 2)
	for _, sys := range []*system{one, two} {
		wg.Go(func() {
			for {
				res, err := sys.app.SweepRetention(context.WithoutCancel(t.Context()))
				deleted.Add(int64(res.Deleted))
				if err != nil || res.Deleted == 0 {
					sweepErrs <- err
					return
				}
			}
		})
	}
	// Starts on both replicas while the sweeps run and the open transaction holds its runs.
	var started []string
	for i := range 20 {
		b := o
		if i%2 == 1 {
			b = onTwo
		}
		started = append(started, b.startRun(t, "wf_done", map[string]any{"idempotencyKey": fmt.Sprintf("live-%d", i)}))
	}
	for _, id := range started {
		o.waitStatus(t, id, "completed")
	}
	done := make(chan struct{})
	go func() { wg.Wait(); close(done) }()
	select {
	case <-done:
	case <-time.After(60 * time.Second):
		t.Fatal("the sweeps did not finish while another transaction held some expired runs: a sweep waited for it")
	}
	for range 2 {
		require.NoError(t, <-sweepErrs)
	}
	require.EqualValues(t, n, deleted.Load(), "every expired run deleted exactly once, none of the held ones")
	require.Zero(t, owned(t, pool, expired)["runs"])
	require.NoError(t, tx.Rollback(t.Context()))
	require.Equal(t, len(held), owned(t, pool, held)["runs"], "the held runs were skipped")

	// Now free, the held runs go with the next sweep; the runs started meanwhile stay.
	res, err := two.app.SweepRetention(t.Context())
	require.NoError(t, err)
	require.Equal(t, len(held), res.Deleted)
	for table, c := range owned(t, pool, append(expired, held...)) {
		require.Zero(t, c, "%s rows of deleted runs are left", table)
	}
	require.Len(t, started, owned(t, pool, started)["runs"])
}
