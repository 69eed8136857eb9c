package postgres

// Concurrency groups (README "Concurrency per workflow and key"): at most limit runs of one
// (organization, workflow, key) are admitted and not terminal at once. A run is admitted (its
// first job queued) at its dispatch when its group has room and no older run of the group
// waits, else it stays queued, held back; the transaction that ends an admitted run admits the
// next ones. Every admission happens under a transaction-scoped advisory lock on the group,
// taken after the run's own row lock (never before), so counts and admissions are exact across
// replicas. A holder of a group's lock never waits for a run's row lock (the next runs are
// picked with SKIP LOCKED), and a transaction that takes several groups' locks takes them in
// lock id order: the locks cannot deadlock. The sweep admits what a skipped row left waiting.

import (
	"cmp"
	"context"
	"encoding/json"
	"fmt"
	"slices"
	"time"

	"github.com/jackc/pgx/v5"

	"svc.dev/libs/pgdb"
	"svc.dev/services/run-orchestrator/internal/app/engine"
	"svc.dev/services/run-orchestrator/internal/domain/run"
)

// group names a concurrency group; limit is the limit to admit by (the newest pinned
// definition the caller has: each candidate is admitted by its own limit).
type group struct {
	org, workflow, key string
	limit              int
}

// lockID is the group's advisory lock.
func (g group) lockID() int64 {
	return pgdb.LockID("orchestrator:concurrency\x00" + g.org + "\x00" + g.workflow + "\x00" + g.key)
}

// sortGroups orders gs by lock id (the order every transaction takes them in) and drops
// duplicates, keeping the highest limit.
func sortGroups(gs []group) []group {
	slices.SortFunc(gs, func(a, b group) int {
		return cmp.Or(cmp.Compare(a.lockID(), b.lockID()), cmp.Compare(a.org, b.org), cmp.Compare(a.workflow, b.workflow),
			cmp.Compare(a.key, b.key), cmp.Compare(b.limit, a.limit))
	})
	return slices.CompactFunc(gs, func(a, b group) bool { return a.org == b.org && a.workflow == b.workflow && a.key == b.key })
}

// admission is what admit did to one group.
type admission struct {
	// inProgress is the group's count of admitted runs not terminal, after admit (runs
	// ending in the transaction excluded).
	inProgress int
	// admitted are the runs admitted, in order.
	admitted []string
	// changes are the status changes of admitted runs that had been held back (to publish
	// after the commit).
	changes []run.Change
}

// admit locks group g in tx and admits its oldest queued runs while the group has room (each
// by its own limit; the first that does not fit stops it, so runs are admitted in start
// order), queueing their first jobs. ending are runs of g that this transaction ends (their
// rows may still say otherwise); fresh are runs this transaction inserted, whose admission
// is not an event (they were never seen held).
func (s *RunStore) admit(ctx context.Context, tx pgx.Tx, g group, ending []string, fresh map[string]bool) (admission, error) {
	var a admission
	if _, err := tx.Exec(ctx, `SELECT pg_advisory_xact_lock($1)`, g.lockID()); err != nil {
		return a, fmt.Errorf("lock concurrency group: %w", err)
	}
	if ending == nil {
		ending = []string{}
	}
	// A statement after the lock's: it sees every commit of the lock's previous holders.
	if err := tx.QueryRow(ctx, `SELECT count(*) FROM runs WHERE organization_id = $1 AND workflow_id = $2 AND concurrency_key = $3
		AND admitted AND status IN ('queued', 'running', 'waiting') AND id <> ALL($4)`, g.org, g.workflow, g.key, ending).Scan(&a.inProgress); err != nil {
		return a, fmt.Errorf("count concurrency group: %w", err)
	}
	room := g.limit - a.inProgress
	if room <= 0 {
		return a, nil
	}
	rows, err := tx.Query(ctx, `SELECT id, concurrency_limit FROM runs WHERE organization_id = $1 AND workflow_id = $2 AND concurrency_key = $3
		AND NOT admitted AND status = 'queued' ORDER BY id LIMIT $4 FOR UPDATE SKIP LOCKED`, g.org, g.workflow, g.key, room)
	if err != nil {
		return a, fmt.Errorf("next runs of concurrency group: %w", err)
	}
	type candidate struct {
		id    string
		limit int
	}
	cands, err := pgx.CollectRows(rows, func(r pgx.CollectableRow) (candidate, error) {
		var c candidate
		return c, r.Scan(&c.id, &c.limit)
	})
	if err != nil {
		return a, fmt.Errorf("next runs of concurrency group: %w", err)
	}
	var held []string
	for _, c := range cands {
		if a.inProgress >= c.limit {
			break
		}
		a.inProgress++
		a.admitted = append(a.admitted, c.id)
		if !fresh[c.id] {
			held = append(held, c.id)
		}
	}
	if len(a.admitted) == 0 {
		return a, nil
	}
	if _, err := tx.Exec(ctx, `UPDATE runs SET admitted = true WHERE id = ANY($1)`, a.admitted); err != nil {
		return a, fmt.Errorf("admit runs: %w", err)
	}
	if len(held) > 0 {
		// Leaving the held state is an event of the run's stream: a queued status without a
		// queue, at a sequence of its own.
		now := time.Now()
		rows, err := tx.Query(ctx, `WITH a AS (UPDATE runs SET change_seq = change_seq + 1, updated_at = now() WHERE id = ANY($1)
				RETURNING id, change_seq)
			INSERT INTO run_statuses (run_id, seq, status, at) SELECT id, change_seq, 'queued', $2 FROM a RETURNING run_id, seq`, held, now)
		if err != nil {
			return a, fmt.Errorf("log admissions: %w", err)
		}
		var (
			id  string
			seq int64
		)
		if _, err := pgx.ForEachRow(rows, []any{&id, &seq}, func() error {
			a.changes = append(a.changes, run.Change{Kind: run.ChangeStatus, RunID: id, OrganizationID: g.org, WorkflowID: g.workflow,
				Seq: seq, Status: run.StatusQueued, At: now})
			return nil
		}); err != nil {
			return a, fmt.Errorf("log admissions: %w", err)
		}
	}
	jobs := make([]engine.NewJob, len(a.admitted))
	for i, id := range a.admitted {
		jobs[i] = engine.NewJob{RunID: id, Org: g.org}
	}
	if err := s.jobs.Insert(ctx, tx, jobs, time.Time{}); err != nil {
		return a, fmt.Errorf("queue admitted runs: %w", err)
	}
	return a, nil
}

// hold logs, for runs this dispatch stored and could not admit, the queued status that says
// why they wait (their stream's event on entering the held state), at sequence 1.
func hold(ctx context.Context, tx pgx.Tx, g group, ids []string, inProgress int) ([]run.Change, error) {
	if len(ids) == 0 {
		return nil, nil
	}
	q := run.Queued{Reason: run.QueueReasonConcurrency, Key: g.key, Limit: g.limit, InProgress: inProgress}
	raw, err := json.Marshal(q)
	if err != nil {
		return nil, fmt.Errorf("hold runs: %w", err)
	}
	now := time.Now()
	if _, err := tx.Exec(ctx, `WITH h AS (UPDATE runs SET change_seq = 1 WHERE id = ANY($1) RETURNING id)
		INSERT INTO run_statuses (run_id, seq, status, queue, at) SELECT id, 1, 'queued', $2::jsonb, $3 FROM h`, ids, string(raw), now); err != nil {
		return nil, fmt.Errorf("hold runs: %w", err)
	}
	changes := make([]run.Change, len(ids))
	for i, id := range ids {
		changes[i] = run.Change{Kind: run.ChangeStatus, RunID: id, OrganizationID: g.org, WorkflowID: g.workflow, Seq: 1,
			Status: run.StatusQueued, At: now}
	}
	return changes, nil
}

// dispatchGroups admits, after a dispatch stored runs (held: not admitted, no job), what each
// of their groups has room for (in lock id order), and logs why the rest wait. It returns
// the changes to publish after the commit.
func (s *RunStore) dispatchGroups(ctx context.Context, tx pgx.Tx, runs []run.NewRun, ids []string) ([]run.Change, error) {
	var gs []group
	members := map[[3]string][]string{}
	fresh := map[string]bool{}
	for i, r := range runs {
		if r.Group == nil || ids[i] != r.ID {
			continue
		}
		g := group{org: r.OrganizationID, workflow: r.WorkflowID, key: r.Group.Key, limit: r.Group.Limit}
		gs = append(gs, g)
		k := [3]string{g.org, g.workflow, g.key}
		members[k] = append(members[k], r.ID)
		fresh[r.ID] = true
	}
	var changes []run.Change
	for _, g := range sortGroups(gs) {
		a, err := s.admit(ctx, tx, g, nil, fresh)
		if err != nil {
			return nil, err
		}
		changes = append(changes, a.changes...)
		in := make(map[string]bool, len(a.admitted))
		for _, id := range a.admitted {
			in[id] = true
		}
		var held []string
		for _, id := range members[[3]string{g.org, g.workflow, g.key}] {
			if !in[id] {
				held = append(held, id)
			}
		}
		h, err := hold(ctx, tx, g, held, a.inProgress)
		if err != nil {
			return nil, err
		}
		changes = append(changes, h...)
	}
	return changes, nil
}

// ends reports whether o ends the run (a terminal status among its changes).
func ends(o *run.Outcome) bool {
	for _, c := range o.Changes {
		if c.Kind == run.ChangeStatus && c.Status.Terminal() {
			return true
		}
	}
	return false
}

// release admits, when o ends the locked run l and l held a slot of its group, the group's
// next runs in the same transaction. It returns the changes to publish after the commit
// (nil, with no statement, for a run without a limit).
func (s *RunStore) release(ctx context.Context, tx pgx.Tx, l *Locked, o *run.Outcome) ([]run.Change, error) {
	if l.group == nil || !l.admitted || l.status.Terminal() || !ends(o) {
		return nil, nil
	}
	a, err := s.admit(ctx, tx, *l.group, []string{l.run.ID}, nil)
	if err != nil {
		return nil, err
	}
	return a.changes, nil
}

// heldAfter is how long a run must have waited before the sweep looks at its group: the
// ending transactions admit runs as they go, and the sweep only catches what they could not
// (a run skipped because a transaction that then rolled back held its row lock).
const heldAfter = 5 * time.Second

// strandedGroups lists the groups that have room but whose oldest held run has waited
// longer than heldAfter, at most 100 a round.
func strandedGroups(ctx context.Context, tx pgx.Tx) ([]group, error) {
	rows, err := tx.Query(ctx, `SELECT DISTINCT ON (h.organization_id, h.workflow_id, h.concurrency_key)
			h.organization_id, h.workflow_id, h.concurrency_key, h.concurrency_limit
		FROM runs h
		WHERE h.concurrency_key IS NOT NULL AND h.status = 'queued' AND NOT h.admitted AND h.created_at < now() - $1::interval
		  AND (SELECT count(*) FROM runs c WHERE c.organization_id = h.organization_id AND c.workflow_id = h.workflow_id
		       AND c.concurrency_key = h.concurrency_key AND c.admitted AND c.status IN ('queued', 'running', 'waiting')) < h.concurrency_limit
		ORDER BY h.organization_id, h.workflow_id, h.concurrency_key, h.id
		LIMIT 100`, heldAfter.String())
	if err != nil {
		return nil, fmt.Errorf("find stranded runs: %w", err)
	}
	gs, err := pgx.CollectRows(rows, func(r pgx.CollectableRow) (group, error) {
		var g group
		return g, r.Scan(&g.org, &g.workflow, &g.key, &g.limit)
	})
	if err != nil {
		return nil, fmt.Errorf("find stranded runs: %w", err)
	}
	return gs, nil
}

// sweepGroups admits, in the sweep's transaction and in lock id order, what the groups of the
// runs the sweep ended (ending: their ids by group) and the stranded groups have room for. It
// returns the changes to publish after the commit.
func (s *RunStore) sweepGroups(ctx context.Context, tx pgx.Tx, ending map[group][]string) ([]run.Change, error) {
	gs, err := strandedGroups(ctx, tx)
	if err != nil {
		return nil, err
	}
	for g := range ending {
		gs = append(gs, g)
	}
	var changes []run.Change
	for _, g := range sortGroups(gs) {
		var ids []string
		for eg, e := range ending {
			if eg.org == g.org && eg.workflow == g.workflow && eg.key == g.key {
				ids = append(ids, e...)
			}
		}
		a, err := s.admit(ctx, tx, g, ids, nil)
		if err != nil {
			return nil, err
		}
		if len(a.admitted) > 0 && len(ids) == 0 {
			s.log.Warn("stranded runs admitted", "organization_id", g.org, "workflow_id", g.workflow, "key", g.key, "runs", len(a.admitted))
		}
		changes = append(changes, a.changes...)
	}
	return changes, nil
}
