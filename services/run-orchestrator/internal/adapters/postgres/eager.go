package postgres

// Runs finished at their dispatch (engine.FinishAtDispatch): the dispatch transaction stores
// such a run as it ended instead of queueing a job for it.

import (
	"context"
	"encoding/json"
	"fmt"

	"github.com/jackc/pgx/v5"

	"svc.dev/services/run-orchestrator/internal/domain/run"
)

// AtDispatchFunc runs a new run (queued, in memory) to its end at its dispatch when it may:
// it returns the outcome that ends it and done, called once with whether the dispatch
// committed; ok false leaves the run to a job.
type AtDispatchFunc func(ctx context.Context, r *run.Run) (o run.Outcome, done func(committed bool), ok bool)

// RunAtDispatch makes the store finish at their dispatch the runs f runs to their end. Call
// it before the first dispatch.
func (s *RunStore) RunAtDispatch(f AtDispatchFunc) { s.atDispatch = f }

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
func (s *RunStore) runAtDispatch(ctx context.Context, nr run.NewRun) *finished {
	// A run of a concurrency group runs only once admitted, which its dispatch transaction
	// decides: it never runs before it.
	if s.atDispatch == nil || nr.Group != nil {
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
	o, done, ok := s.atDispatch(ctx, r)
	if !ok {
		return nil
	}
	return &finished{run: r, o: o, done: done}
}

// queueFinished queues the writes of runs ended at their dispatch into b: the run's row was
// inserted earlier in the same transaction, as it ended (f.inserted) or else queued.
func (s *RunStore) queueFinished(b *pgx.Batch, fs []*finished) error {
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
