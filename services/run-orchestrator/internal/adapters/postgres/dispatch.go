package postgres

import (
	"bytes"
	"cmp"
	"context"
	"crypto/sha256"
	"errors"
	"fmt"
	"slices"
	"time"

	"github.com/jackc/pgx/v5"

	"svc.dev/services/run-orchestrator/internal/app/engine"
	"svc.dev/services/run-orchestrator/internal/domain/run"
)

var errDuplicateKey = errors.New("idempotency key already used")

// DispatchMany stores runs, their idempotency records (keys[i] is runs[i]'s key; "" for none)
// and their first jobs in one transaction (a run that ends at its dispatch is stored ended,
// with no job). The (organization, key) pairs that are set must be
// distinct. It returns, per run, the run that holds its key: runs[i].ID when it was stored, or
// the run of a concurrent start that took the key first (that run is then not stored). Either
// everything is stored or, on error, nothing.
func (s *RunStore) DispatchMany(ctx context.Context, runs []run.NewRun, keys []string, ended []*engine.Ended) ([]string, error) {
	if len(keys) != len(runs) || len(ended) != len(runs) {
		return nil, fmt.Errorf("dispatch many: %d runs, %d keys, %d ended", len(runs), len(keys), len(ended))
	}
	ids := make([]string, len(runs))
	if len(runs) == 0 {
		return ids, nil
	}
	// Keys are inserted in (organization, key) order, so two batches that share keys lock
	// them in the same order and never deadlock.
	keyed := make([]int, 0, len(runs))
	seen := make(map[[2]string]bool, len(runs))
	for i, k := range keys {
		if k == "" {
			continue
		}
		ok := [2]string{runs[i].OrganizationID, k}
		if seen[ok] {
			return nil, fmt.Errorf("dispatch many: key %q of %s twice", k, runs[i].OrganizationID)
		}
		seen[ok] = true
		keyed = append(keyed, i)
	}
	slices.SortFunc(keyed, func(a, b int) int {
		return cmp.Or(cmp.Compare(runs[a].OrganizationID, runs[b].OrganizationID), cmp.Compare(keys[a], keys[b]))
	})
	if err := s.dispatch(ctx, runs, keys, ended, keyed, ids); err != nil {
		return nil, fmt.Errorf("dispatch many: %w", err)
	}
	return ids, nil
}

// dispatch is DispatchMany's transaction. BEGIN travels with the runs' and the keys' inserts
// in one round trip; River's insert of the jobs follows, then the COMMIT with the writes of
// the runs that ended at their dispatch (eager.go), which get no job. ids[i] is set to the run
// holding runs[i]'s key.
func (s *RunStore) dispatch(ctx context.Context, runs []run.NewRun, keys []string, ends []*engine.Ended, keyed []int, ids []string) (err error) {
	// Runs that ended at their dispatch are stored as they ended if they are stored at all.
	ended := make([]*finished, len(runs))
	for i, e := range ends {
		if e != nil {
			ended[i] = &finished{run: e.Run, o: e.Outcome}
		}
	}
	var written []*finished
	pc, err := s.pool.Acquire(ctx)
	if err != nil {
		return fmt.Errorf("acquire a connection: %w", err)
	}
	// Release destroys a connection left inside a transaction rather than reuse it.
	defer pc.Release()
	conn := pc.Conn()
	defer func() {
		if err != nil {
			rollback(context.WithoutCancel(ctx), conn)
		}
	}()
	n := len(runs)
	rid, org, wf, in, trig := make([]string, n), make([]string, n), make([]string, n), make([]string, n), make([]string, n)
	hash := make([][]byte, n)
	ver := make([]int64, n)
	// A run that ended at its dispatch is inserted as it ended (status, change sequence, state
	// revision, output or error, start and finish times), not inserted queued and then updated
	// in the same transaction: one statement and one dead row version fewer per run, and its
	// index entries written once.
	status, out, fail := make([]string, n), make([]*string, n), make([]*string, n)
	seq, rev := make([]int64, n), make([]int64, n)
	// A run of a concurrency group is inserted with its key and limit, not admitted, and gets
	// its job only when its group admits it (concurrency.go); other runs are admitted.
	concKey, concLimit := make([]*string, n), make([]*int32, n)
	limited := false
	allEnded := true
	for i, r := range runs {
		rid[i], org[i], wf[i], ver[i] = r.ID, r.OrganizationID, r.WorkflowID, r.WorkflowVersion
		in[i], trig[i] = string(r.Input), string(r.Trigger)
		sum := sha256.Sum256(r.Definition)
		hash[i] = sum[:]
		ids[i] = r.ID
		status[i] = string(run.StatusQueued)
		if g := r.Group; g != nil {
			limit := int32(g.Limit) //nolint:gosec // at most run.MaxConcurrencyLimit
			concKey[i], concLimit[i], limited = &g.Key, &limit, true
		}
		f := ended[i]
		if f == nil || f.o.Finish == nil {
			allEnded = false
			continue
		}
		f.inserted = true
		status[i], seq[i], rev[i] = string(f.run.Status), f.run.Seq, insertedRev
		out[i], fail[i] = jsonText(f.o.Finish.Output), jsonText(f.o.Finish.Error)
	}
	first := &pgx.Batch{}
	first.Queue("BEGIN")
	queueDefinitions(first, runs, hash)
	first.Queue(`INSERT INTO runs (id, organization_id, workflow_id, workflow_version, definition_hash, input, status, trigger,
			change_seq, state_rev, output, error, started_at, finished_at, concurrency_key, concurrency_limit, admitted)
		SELECT id, org, wf, ver, hash, input::jsonb, st, trig::jsonb,
			seq, rev, out::jsonb, err::jsonb, CASE WHEN st <> 'queued' THEN now() END, CASE WHEN st <> 'queued' THEN now() END,
			ckey, climit, ckey IS NULL
		FROM unnest($1::text[], $2::text[], $3::text[], $4::bigint[], $5::bytea[], $6::text[], $7::text[],
			$8::text[], $9::bigint[], $10::bigint[], $11::text[], $12::text[], $13::text[], $14::int[])
			AS r(id, org, wf, ver, hash, input, trig, st, seq, rev, out, err, ckey, climit)`,
		rid, org, wf, ver, hash, in, trig, status, seq, rev, out, fail, concKey, concLimit)
	var won []string
	if len(keyed) > 0 {
		queueKeys(first, runs, keys, keyed, &won)
	}
	// Without keys every run is stored, and runs that all ended need no job: their writes and
	// the COMMIT go in the same round trip.
	if len(keyed) == 0 && allEnded {
		written = ended
		if err := s.queueFinished(first, written); err != nil {
			return err
		}
		first.Queue("COMMIT")
		if err := conn.SendBatch(ctx, first).Close(); err != nil {
			return fmt.Errorf("insert and commit ended runs: %w", err)
		}
		return s.committed(conn, written)
	}
	if err := conn.SendBatch(ctx, first).Close(); err != nil {
		return fmt.Errorf("insert runs and keys: %w", err)
	}
	tx := connTx{conn}
	if len(keyed) > 0 && len(won) < len(keyed) {
		lost, err := lostKeys(ctx, tx, runs, keys, keyed, won)
		if err != nil {
			return err
		}
		var drop []string
		for i, winner := range lost {
			ids[i] = winner
			drop = append(drop, runs[i].ID)
		}
		if _, err := tx.Exec(ctx, `DELETE FROM runs WHERE id = ANY($1)`, drop); err != nil {
			return fmt.Errorf("drop runs whose key was taken: %w", err)
		}
	}
	jobs := make([]engine.NewJob, 0, n)
	for i, r := range runs {
		switch {
		case ids[i] != r.ID:
		case ended[i] != nil:
			written = append(written, ended[i])
		case r.Group != nil: // its group admits it, below
		default:
			jobs = append(jobs, engine.NewJob{RunID: r.ID, Org: r.OrganizationID})
		}
	}
	if len(jobs) > 0 {
		if err := s.jobs.Insert(ctx, tx, jobs, time.Time{}); err != nil {
			return fmt.Errorf("insert jobs: %w", err)
		}
	}
	var held []run.Change
	if limited {
		if held, err = s.dispatchGroups(ctx, tx, runs, ids); err != nil {
			return err
		}
	}
	last := &pgx.Batch{}
	if err := s.queueFinished(last, written); err != nil {
		return err
	}
	last.Queue("COMMIT")
	if err := conn.SendBatch(ctx, last).Close(); err != nil {
		return fmt.Errorf("commit: %w", err)
	}
	if err := s.committed(conn, written); err != nil {
		return err
	}
	if len(held) > 0 {
		s.events.Publish(held)
	}
	return nil
}

// queueDefinitions queues the insert of the runs' definitions into run_definitions, each
// distinct (organization, workflow, hash) once, where it is not stored yet (0015): a run names
// its definition by its hash. They go in key order, so two batches that insert the same new
// definitions wait for each other in the same order and never deadlock.
func queueDefinitions(b *pgx.Batch, runs []run.NewRun, hash [][]byte) {
	type key struct {
		org, wf string
		hash    []byte
	}
	keys := make([]key, 0, 1)
	defs := make([]string, 0, 1)
	for i, r := range runs {
		k := key{r.OrganizationID, r.WorkflowID, hash[i]}
		if slices.ContainsFunc(keys, func(o key) bool { return o.org == k.org && o.wf == k.wf && bytes.Equal(o.hash, k.hash) }) {
			continue
		}
		keys, defs = append(keys, k), append(defs, string(r.Definition))
	}
	idx := make([]int, len(keys))
	for i := range idx {
		idx[i] = i
	}
	slices.SortFunc(idx, func(a, b int) int {
		return cmp.Or(cmp.Compare(keys[a].org, keys[b].org), cmp.Compare(keys[a].wf, keys[b].wf), bytes.Compare(keys[a].hash, keys[b].hash))
	})
	org, wf, h, def := make([]string, len(idx)), make([]string, len(idx)), make([][]byte, len(idx)), make([]string, len(idx))
	for j, i := range idx {
		org[j], wf[j], h[j], def[j] = keys[i].org, keys[i].wf, keys[i].hash, defs[i]
	}
	b.Queue(`INSERT INTO run_definitions (organization_id, workflow_id, hash, definition)
		SELECT org, wf, hash, def::jsonb FROM unnest($1::text[], $2::text[], $3::bytea[], $4::text[]) WITH ORDINALITY AS d(org, wf, hash, def, n)
		ORDER BY n ON CONFLICT (organization_id, workflow_id, hash) DO NOTHING`, org, wf, h, def)
}

// committed checks that the dispatch's COMMIT ended the transaction, then lets the runs ended
// at their dispatch publish what they did.
func (s *RunStore) committed(conn *pgx.Conn, written []*finished) error {
	if st := conn.PgConn().TxStatus(); st != 'I' {
		return fmt.Errorf("the commit left the connection in transaction state %q", st)
	}
	for _, f := range written {
		s.after(f.run.ID, &f.o)
	}
	return nil
}

// queueKeys queues the insert of the idempotency records of runs[keyed...] into b; a key older
// than 24 h is taken over, a fresh one is the earlier start's. The runs whose key was stored
// are appended to won; a key a concurrent start holds (committed before this statement got
// its row lock) is not.
func queueKeys(b *pgx.Batch, runs []run.NewRun, keys []string, keyed []int, won *[]string) {
	org, key, rid := make([]string, len(keyed)), make([]string, len(keyed)), make([]string, len(keyed))
	for j, i := range keyed {
		org[j], key[j], rid[j] = runs[i].OrganizationID, keys[i], runs[i].ID
	}
	b.Queue(`INSERT INTO idempotency_keys (organization_id, key, run_id)
		SELECT org, key, rid FROM unnest($1::text[], $2::text[], $3::text[]) WITH ORDINALITY AS k(org, key, rid, n) ORDER BY n
		ON CONFLICT (organization_id, key) DO UPDATE SET run_id = excluded.run_id, created_at = now()
		WHERE idempotency_keys.created_at < now() - interval '24 hours'
		RETURNING run_id`, org, key, rid).Query(func(rows pgx.Rows) error {
		ids, err := pgx.CollectRows(rows, pgx.RowTo[string])
		*won = ids
		if err != nil {
			return fmt.Errorf("insert idempotency keys: %w", err)
		}
		return nil
	})
}

// lostKeys reads, for each run of keyed whose key a concurrent start holds (not in won), the
// winner's run: the result maps the run's index to it.
func lostKeys(ctx context.Context, tx pgx.Tx, runs []run.NewRun, keys []string, keyed []int, won []string) (map[int]string, error) {
	stored := make(map[string]bool, len(won))
	for _, id := range won {
		stored[id] = true
	}
	var lostOrg, lostKey []string
	lostIdx := map[[2]string]int{}
	for _, i := range keyed {
		if !stored[runs[i].ID] {
			lostOrg, lostKey = append(lostOrg, runs[i].OrganizationID), append(lostKey, keys[i])
			lostIdx[[2]string{runs[i].OrganizationID, keys[i]}] = i
		}
	}
	// A new statement sees the winners' commits (read committed).
	rows, err := tx.Query(ctx, `SELECT i.organization_id, i.key, i.run_id FROM idempotency_keys i
		JOIN unnest($1::text[], $2::text[]) AS k(org, key) ON i.organization_id = k.org AND i.key = k.key`, lostOrg, lostKey)
	if err != nil {
		return nil, fmt.Errorf("read idempotency keys: %w", err)
	}
	lost := make(map[int]string, len(lostIdx))
	var o, k, id string
	if _, err := pgx.ForEachRow(rows, []any{&o, &k, &id}, func() error {
		if i, ok := lostIdx[[2]string{o, k}]; ok {
			lost[i] = id
		}
		return nil
	}); err != nil {
		return nil, fmt.Errorf("read idempotency keys: %w", err)
	}
	if len(lost) != len(lostIdx) {
		return nil, fmt.Errorf("read idempotency keys: %w", errDuplicateKey)
	}
	return lost, nil
}

// RunsForKeys returns, per (orgs[i], keys[i]), the run the unexpired idempotency key names, or
// "", in one query.
func (s *RunStore) RunsForKeys(ctx context.Context, orgs, keys []string) ([]string, error) {
	out := make([]string, len(keys))
	if len(keys) == 0 {
		return out, nil
	}
	rows, err := s.pool.Query(ctx, `SELECT k.n, i.run_id FROM unnest($1::text[], $2::text[]) WITH ORDINALITY AS k(org, key, n)
		JOIN idempotency_keys i ON i.organization_id = k.org AND i.key = k.key
		AND i.created_at >= now() - interval '24 hours'`, orgs, keys)
	if err != nil {
		return nil, fmt.Errorf("read idempotency keys: %w", err)
	}
	var (
		n  int64
		id string
	)
	if _, err := pgx.ForEachRow(rows, []any{&n, &id}, func() error {
		if n >= 1 && int(n) <= len(out) {
			out[n-1] = id
		}
		return nil
	}); err != nil {
		return nil, fmt.Errorf("read idempotency keys: %w", err)
	}
	return out, nil
}
