package postgres

// The writes an outcome makes, queued into the batch that carries the COMMIT.

import (
	"encoding/json"
	"fmt"
	"time"

	"github.com/jackc/pgx/v5"

	"svc.dev/services/run-orchestrator/internal/domain/run"
)

// queueWrites queues the writes of outcome o on the locked run l into b: attempts begun and
// ended, the blocks that changed, waits, a consumed signal and the run's row. It returns the
// run's new state revision (l.rev when nothing changed).
func (s *RunStore) queueWrites(b *pgx.Batch, l *Locked, o *run.Outcome) (int64, error) {
	r := l.run
	retryAt := func(block string) *time.Time {
		// A failed attempt that will be retried keeps the retry's time (the event stream's
		// attempt.finished retry_at).
		if o.Retry != nil && o.Retry.Block == block {
			return &o.Retry.At
		}
		return nil
	}
	joined, err := queueBegun(b, s.replica, r.ID, o, retryAt)
	if err != nil {
		return 0, err
	}
	for _, in := range o.Inputs {
		b.Queue(`UPDATE step_attempts SET input = $2::jsonb WHERE id = $1`, in.ID, string(in.Input))
	}
	for _, a := range o.Ended {
		if joined[a.ID] {
			continue
		}
		b.Queue(`UPDATE step_attempts SET status = $2, output = $3, error = $4, seq = $5, retry_at = $6, finished_at = now() WHERE id = $1`,
			a.ID, a.Status, jsonText(a.Output), jsonText(a.Error), a.Seq, retryAt(a.Block))
	}
	if len(o.Changed) == 0 && r.Status == l.status && r.Seq == l.seq && o.Finish == nil && len(o.Armed) == 0 &&
		len(o.Released) == 0 && !o.ReleaseAll && o.Consume == nil {
		return l.rev, nil
	}
	rev := l.rev + 1
	switch {
	case o.Finish != nil && !l.inserted:
		// A run that is over keeps no block rows (0015_run_history_bytes.sql).
		b.Queue(`DELETE FROM run_blocks WHERE run_id = $1`, r.ID)
	case o.Finish != nil: // inserted as it ended: it has none
	case len(o.Changed) > 0:
		if err := queueBlocks(b, r, o.Changed, rev); err != nil {
			return 0, err
		}
	}
	for _, w := range o.Armed {
		var sig *string
		if w.Wait.Kind == run.WaitSignal {
			sig = &w.Wait.Signal
		}
		var wake *time.Time
		if !w.Wait.WakeAt.IsZero() {
			wake = &w.Wait.WakeAt
		}
		b.Queue(`INSERT INTO waits (run_id, block_id, kind, signal_name, wake_at, attempt_id) VALUES ($1, $2, $3, $4, $5, $6)`,
			r.ID, w.Block, w.Wait.Kind, sig, wake, w.AttemptID)
	}
	if o.ReleaseAll {
		b.Queue(`DELETE FROM waits WHERE run_id = $1`, r.ID)
	} else if len(o.Released) > 0 {
		b.Queue(`DELETE FROM waits WHERE run_id = $1 AND block_id = ANY($2)`, r.ID, o.Released)
	}
	if o.Consume != nil {
		b.Queue(`UPDATE signals SET consumed_by = $2, consumed_at = now() WHERE id = $1`, o.Consume.SignalID, o.Consume.AttemptID)
	}
	queueStatuses(b, r.ID, o.Changes)
	if l.inserted && o.Finish != nil {
		return rev, nil // the dispatch inserted the row as the run ended
	}
	if f := o.Finish; f != nil {
		b.Queue(`UPDATE runs SET status = $2, change_seq = $3, state_rev = $4, updated_at = now(),
			output = $5, error = $6, finished_at = now(), started_at = coalesce(started_at, now())
			WHERE id = $1`, r.ID, string(r.Status), r.Seq, rev, jsonText(f.Output), jsonText(f.Error))
	} else {
		b.Queue(`UPDATE runs SET status = $2, change_seq = $3, state_rev = $4, updated_at = now(),
			started_at = CASE WHEN $2 IN ('running', 'waiting') THEN coalesce(started_at, now()) ELSE started_at END
			WHERE id = $1`, r.ID, string(r.Status), r.Seq, rev)
	}
	return rev, nil
}

// queueBegun inserts the rows of the attempts o begins, in one statement: an attempt that also
// ended in o (an inline block, begun and finished in one transaction) is inserted as it ended.
// It returns the ids of those.
func queueBegun(b *pgx.Batch, replica, runID string, o *run.Outcome, retryAt func(block string) *time.Time) (map[string]bool, error) {
	if len(o.Begun) == 0 {
		return nil, nil
	}
	ended := make(map[string]run.EndedAttempt, len(o.Ended))
	for _, a := range o.Ended {
		ended[a.ID] = a
	}
	n := len(o.Begun)
	ids, blocks, types, statuses := make([]string, n), make([]string, n), make([]string, n), make([]string, n)
	inputs, outputs, errs := make([]string, n), make([]*string, n), make([]*string, n)
	attempts := make([]int32, n)
	seqs, startedSeqs := make([]int64, n), make([]int64, n)
	finished := make([]bool, n)
	retries := make([]*time.Time, n)
	joined := map[string]bool{}
	for i, st := range o.Begun {
		params, err := json.Marshal(st.Params)
		if err != nil {
			return nil, fmt.Errorf("attempt input: %w", err)
		}
		ids[i], blocks[i], types[i], inputs[i] = st.ID, st.Block.ID, st.Block.Type, string(params)
		attempts[i] = int32(st.Attempt) //nolint:gosec // attempts are capped at 10
		statuses[i], seqs[i], startedSeqs[i] = "running", st.Seq, st.Seq
		if e, ok := ended[st.ID]; ok {
			statuses[i], seqs[i], outputs[i], errs[i], finished[i] = e.Status, e.Seq, jsonText(e.Output), jsonText(e.Error), true
			retries[i] = retryAt(e.Block)
			joined[st.ID] = true
		}
	}
	b.Queue(`INSERT INTO step_attempts (id, run_id, block_id, type, attempt, status, input, replica, seq, started_seq, started_at,
			output, error, retry_at, finished_at)
		SELECT a.id, $2, a.block_id, a.type, a.attempt, a.status, a.input::jsonb, $3, a.seq, a.started_seq, now(),
			a.output::jsonb, a.error::jsonb, a.retry_at, CASE WHEN a.finished THEN now() END
		FROM unnest($1::text[], $4::text[], $5::text[], $6::int[], $7::text[], $8::text[], $9::bigint[], $10::bigint[],
			$11::text[], $12::text[], $13::timestamptz[], $14::bool[])
			AS a(id, block_id, type, attempt, status, input, seq, started_seq, output, error, retry_at, finished)`,
		ids, runID, replica, blocks, types, attempts, statuses, inputs, seqs, startedSeqs, outputs, errs, retries, finished)
	return joined, nil
}

// queueStatuses appends the run's status changes to its status log (the event stream's), in
// one statement (a commit that runs inline blocks may change the status more than once). Each
// is stamped with the transaction's time, now(), as the attempts begun and ended in the same
// commit are: the stream says when the run took each status, and a status stamped by the
// worker's clock, read after the transaction began, came out later than the attempts of its
// own commit that followed it.
func queueStatuses(b *pgx.Batch, runID string, changes []run.Change) {
	var (
		seqs                   []int64
		statuses               []string
		blocks, kinds, signals []*string
		wakes                  []*time.Time
	)
	for _, c := range changes {
		if c.Kind != run.ChangeStatus {
			continue
		}
		var (
			block, kind, signal *string
			wake                *time.Time
		)
		if w := c.Wait; w != nil {
			block, kind = &c.BlockID, &w.Kind
			if w.Signal != "" {
				signal = &w.Signal
			}
			if !w.WakeAt.IsZero() {
				wake = &w.WakeAt
			}
		}
		seqs, statuses = append(seqs, c.Seq), append(statuses, string(c.Status))
		blocks, kinds, signals, wakes = append(blocks, block), append(kinds, kind), append(signals, signal), append(wakes, wake)
	}
	if len(seqs) == 0 {
		return
	}
	b.Queue(`INSERT INTO run_statuses (run_id, seq, status, wait_block, wait_kind, wake_at, signal_name, at)
		SELECT $1, s.seq, s.status, s.wait_block, s.wait_kind, s.wake_at, s.signal_name, now()
		FROM unnest($2::bigint[], $3::text[], $4::text[], $5::text[], $6::timestamptz[], $7::text[])
			AS s(seq, status, wait_block, wait_kind, wake_at, signal_name)`,
		runID, seqs, statuses, blocks, kinds, wakes, signals)
}

// queueBlocks upserts the rows of the blocks ids in one statement.
func queueBlocks(b *pgx.Batch, r *run.Run, ids []string, rev int64) error {
	n := len(ids)
	status, attemptIDs, waits, outputs := make([]string, n), make([]*string, n), make([]*string, n), make([]*string, n)
	attempts, lost := make([]int32, n), make([]int32, n)
	jobs := make([]int64, n)
	inFlight, queued := make([]bool, n), make([]bool, n)
	retryAt := make([]*time.Time, n)
	for i, id := range ids {
		bs := r.State.Blocks[id]                                                                                                           // every changed block has an entry
		status[i], attempts[i], lost[i], jobs[i], inFlight[i] = string(bs.Status), int32(bs.Attempts), int32(bs.Lost), bs.Job, bs.InFlight //nolint:gosec // attempts are capped at 10
		queued[i] = bs.Queued
		if bs.AttemptID != "" {
			attemptIDs[i] = &bs.AttemptID
		}
		if !bs.RetryAt.IsZero() {
			retryAt[i] = &bs.RetryAt
		}
		if bs.Wait != nil {
			w, err := json.Marshal(bs.Wait)
			if err != nil {
				return fmt.Errorf("wait of %s: %w", id, err)
			}
			waits[i] = jsonText(w)
		}
		outputs[i] = jsonText(bs.Output)
	}
	b.Queue(`INSERT INTO run_blocks (run_id, block_id, status, attempts, lost, job, attempt_id, in_flight, queued, retry_at, wait, output, rev)
		SELECT $1, b.id, b.status, b.attempts, b.lost, b.job, b.attempt_id, b.in_flight, b.queued, b.retry_at, b.wait::jsonb, b.output::jsonb, $13
		FROM unnest($2::text[], $3::text[], $4::int[], $5::int[], $6::bigint[], $7::text[], $8::bool[], $9::bool[], $10::timestamptz[], $11::text[], $12::text[])
			AS b(id, status, attempts, lost, job, attempt_id, in_flight, queued, retry_at, wait, output)
		ON CONFLICT (run_id, block_id) DO UPDATE SET status = excluded.status, attempts = excluded.attempts, lost = excluded.lost,
			job = excluded.job, attempt_id = excluded.attempt_id, in_flight = excluded.in_flight, queued = excluded.queued,
			retry_at = excluded.retry_at, wait = excluded.wait, output = excluded.output, rev = excluded.rev`,
		r.ID, ids, status, attempts, lost, jobs, attemptIDs, inFlight, queued, retryAt, waits, outputs, rev)
	return nil
}

// jsonText is a JSON document as a nullable text parameter.
func jsonText(raw json.RawMessage) *string {
	if len(raw) == 0 {
		return nil
	}
	s := string(raw)
	return &s
}
