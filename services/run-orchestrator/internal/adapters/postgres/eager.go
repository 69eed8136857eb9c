package postgres

// Runs finished at their dispatch (app/engine/dispatch.go): the dispatch transaction stores
// such a run as it ended instead of queueing a job for it.

import (
	"fmt"

	"github.com/jackc/pgx/v5"

	"svc.dev/services/run-orchestrator/internal/domain/run"
)

// finished is a run ended in memory at its dispatch: its outcome is written in the
// dispatch transaction.
type finished struct {
	run *run.Run
	o   run.Outcome
	// inserted: the dispatch inserted the run's row as the run ended (insertedRev), so its
	// writes leave the row alone.
	inserted bool
}

// insertedRev is the state revision of a run inserted as it ended at its dispatch: the first
// revision after the queued row's 0, as the update it replaces would have written.
const insertedRev = 1

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
