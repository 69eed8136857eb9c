package runstore

// Runs finished at their dispatch. A run whose blocks all run in process with no effect but
// their result (executors.Inline), and few enough of them, is run to its end in memory before
// its dispatch transaction, exactly as its first job would run it inline; that transaction
// then stores the run as it ended (attempts, blocks, status log, output) instead of queueing
// a job for it. Such a run costs one transaction instead of four (dispatch, River's fetch,
// the step, River's completion). Anything a job would have to carry on (an attempt that is
// not inline or failed, a wait, a retry, parallel blocks) sends the run the usual way, with a
// job, and what was run in memory is forgotten.

import (
	"context"
	"encoding/json"
	"fmt"
	"time"

	"github.com/jackc/pgx/v5"

	"svc.dev/services/run-orchestrator/internal/domain/run"
)

// EagerFunc offers to run a new run at its dispatch: for a run it may finish there it returns
// the context to run it in (its trace span), the InlineFunc that runs its blocks and done,
// which the store calls once with whether the dispatch committed (anything the blocks did
// outside the run, a log line, waits for it); for any other run, a nil InlineFunc.
type EagerFunc func(ctx context.Context, r *run.Run) (rctx context.Context, inline InlineFunc, done func(committed bool))

// RunAtDispatch makes the store finish at their dispatch the runs f offers to run. Call it
// before the first dispatch.
func (s *Store) RunAtDispatch(f EagerFunc) { s.eager = f }

// finished is a run ended in memory at its dispatch: its outcome is written in the
// dispatch transaction.
type finished struct {
	run  *run.Run
	o    run.Outcome
	done func(committed bool)
	// inserted: the dispatch inserted the run's row as the run ended (insertedRev), so its
	// writes leave the row alone.
	inserted bool
}

// insertedRev is the state revision of a run inserted as it ended at its dispatch: the first
// revision after the queued row's 0, as the update it replaces would have written.
const insertedRev = 1

// runAtDispatch runs nr in memory as its first job would, its blocks inline. It returns the
// run and the outcome when that ends the run with nothing left for a job, or nil.
func (s *Store) runAtDispatch(ctx context.Context, nr run.NewRun) *finished {
	// A run of a concurrency group runs only once admitted, which its dispatch transaction
	// decides: it never runs before it.
	if s.eager == nil || nr.Group != nil {
		return nil
	}
	var def run.Definition
	if nr.Parsed != nil {
		def = *nr.Parsed // the start parsed it already
	} else {
		var err error
		if def, err = run.ParseDefinition(nr.Definition); err != nil {
			return nil
		}
	}
	r := &run.Run{ID: nr.ID, OrganizationID: nr.OrganizationID, WorkflowID: nr.WorkflowID, Status: run.StatusQueued,
		Def: def, State: run.NewState()}
	if json.Unmarshal(nr.Input, &r.Input) != nil {
		return nil
	}
	ctx, inline, done := s.eager(ctx, r)
	if inline == nil {
		return nil
	}
	o, err := s.interp.Apply(r, run.Advance{JobEvent: run.JobEvent{Try: 1}, Now: time.Now()})
	for n := 0; err == nil && n < MaxInline && o.Fusable(); n++ {
		next, ok := inline(ctx, *o.Start)
		if !ok {
			break
		}
		var more run.Outcome
		if more, err = s.interp.Apply(r, next); err == nil {
			o.Then(more)
		}
	}
	if err != nil || !r.Status.Terminal() || o.Start != nil || o.Retry != nil || o.NewJobs > 0 || o.CancelJobs ||
		len(o.Armed) > 0 || o.Consume != nil {
		done(false)
		return nil
	}
	return &finished{run: r, o: o, done: done}
}

// queueFinished queues the writes of runs ended at their dispatch into b: the run's row was
// inserted earlier in the same transaction, as it ended (f.inserted) or else queued.
func (s *Store) queueFinished(b *pgx.Batch, fs []*finished) error {
	for _, f := range fs {
		rev, err := s.queueWrites(b, &Locked{run: f.run, status: run.StatusQueued, inserted: f.inserted}, &f.o)
		if err != nil {
			return err
		}
		if f.inserted && rev != insertedRev {
			return fmt.Errorf("run %s was inserted at revision %d, its writes are of revision %d", f.run.ID, insertedRev, rev)
		}
	}
	return nil
}
