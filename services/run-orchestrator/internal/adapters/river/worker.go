package river

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"time"

	"github.com/riverqueue/river"
	"github.com/riverqueue/river/rivertype"
	"go.opentelemetry.io/otel/propagation"

	"svc.dev/services/run-orchestrator/internal/app/engine"
)

// worker takes a run's job from River and hands the run to the engine.
type worker struct {
	river.WorkerDefaults[runArgs]
	q *Queue
}

// Timeout is off: steps carry their own timeouts, and a run may take long.
func (w *worker) Timeout(*river.Job[runArgs]) time.Duration { return -1 }

// Work has the engine drive the run. No run is left behind by a job that keeps failing: a
// panic is an error like any other, and when the last of the job's tries fails too, the run
// is failed with the error recorded rather than left waiting for a job River has discarded.
func (w *worker) Work(ctx context.Context, rj *river.Job[runArgs]) error {
	q := w.q
	q.busy.Add(ctx, 1)
	defer q.busy.Add(context.WithoutCancel(ctx), -1)
	if rj.Attempt == 1 && !rj.Args.Due && !snoozed(rj.JobRow) {
		// A tagged job on its first try tells the clock where the queue stands until the
		// queue's head is read. A later try, a job given back by the ceiling (River's snooze
		// sets its attempt back and its scheduled_at to the wall clock) and a job due at a time
		// of its own have a wall-clock time there instead: taken for the head, it would put
		// every organization's next job behind the whole queue.
		q.jobs.fair.Took(rj.ScheduledAt)
	}
	org := rj.Args.Org
	if !q.ceiling.acquire(ctx, org, func() bool { return q.jobs.turns.othersQueued(ctx, org) }, q.engine.Stopping()) {
		// The organization holds its ceiling of this replica's workers: the job goes back to
		// the queue, not counted as a try, and the worker takes what is at the head.
		return river.JobSnooze(0)
	}
	defer q.ceiling.release(org)
	if q.jobs.propagator != nil && len(rj.Args.Trace) > 0 {
		ctx = q.jobs.propagator.Extract(ctx, propagation.MapCarrier(rj.Args.Trace))
	}
	job := &engine.Job{ID: rj.ID, RunID: rj.Args.RunID, Org: org, Try: rj.Attempt, Handle: rj, Ready: readyAt(rj)}
	err := q.engine.Drive(ctx, job)
	if err == nil || rj.Attempt < rj.MaxAttempts || ctx.Err() != nil {
		return err
	}
	q.log.Error("run job failed its last try; failing the run", "run_id", job.RunID, "job_id", job.ID, "attempt", rj.Attempt, "err", err)
	if ferr := q.engine.Fail(context.WithoutCancel(ctx), job, fmt.Errorf("the engine could not go on with this run after %d tries: %w", rj.Attempt, err)); ferr != nil {
		return errors.Join(err, ferr)
	}
	return nil
}

// snoozed reports whether River has snoozed the job: it counts snoozes in the job's metadata.
func snoozed(j *rivertype.JobRow) bool {
	var m struct {
		Snoozes int `json:"snoozes"`
	}
	return len(j.Metadata) > 2 && json.Unmarshal(j.Metadata, &m) == nil && m.Snoozes > 0
}

// NextRetry spaces a failing job's tries 1 s, 2 s, 4 s ... up to a minute apart (River's
// default grows as attempt⁴ seconds, days apart by the last tries): a run whose job fails for
// a passing reason (its database restarting) goes on soon after, and one that keeps failing
// is failed within about 20 minutes.
func (w *worker) NextRetry(job *river.Job[runArgs]) time.Time {
	return time.Now().Add(jobRetryDelay(job.Attempt))
}

// jobRetryDelay is the pause before try attempt+1 of a run's job.
func jobRetryDelay(attempt int) time.Duration {
	d := time.Second << min(max(attempt-1, 0), 6)
	return min(d, time.Minute)
}

// readyAt is when job's work became ready. A job due at once carries a fair share tag as its
// scheduled_at, not a time: it has been ready since it was inserted (also when River snoozed
// it back to the queue). A job due at a time of its own, and a later try, have been ready
// since their scheduled_at.
func readyAt(j *river.Job[runArgs]) time.Time {
	if j.Attempt == 1 && !j.Args.Due {
		return j.CreatedAt
	}
	return j.ScheduledAt
}
