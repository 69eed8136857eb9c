package chaos

import (
	"context"
	"fmt"
	"sync"
)

// archive keeps what the checks need of every run seen finished, for a system that deletes
// finished runs after a retention period (the soak runs with a few minutes of it): by the time
// the checks run, the early runs, their attempts and their signals are gone. Each pass lists
// the runs while they are still there, so a run the sweep deleted is judged on what the last
// pass saw of it, and a run that no pass ever listed and that is gone at the end still counts
// as lost.
type archive struct {
	mu   sync.Mutex
	runs map[string]map[string]map[string]any // kind → run id → its listing, once finished
	// lost counts the attempts recorded lost per "run/block", for the doubled check.
	lost map[string]int
	// signals is what the signals check reads of a finished signal run.
	signals map[string]signalState
}

// signalState is a signal run's stored signals (id → consumed) and how many times its wait
// succeeded.
type signalState struct {
	consumed map[string]bool
	stored   int
	waits    int
}

func newArchive() *archive {
	return &archive{runs: map[string]map[string]map[string]any{}, lost: map[string]int{}, signals: map[string]signalState{}}
}

// keep lists every workflow's runs and stores those that have finished, with their lost
// attempts and signals. It runs while the workload runs, more often than the retention
// period, so every finished run is listed several times before the sweep may delete it.
func (s *stack) keep(ctx context.Context, a *archive) error {
	fresh := map[string]map[string]map[string]any{}
	var signalRuns []string
	for kind, wf := range s.wf {
		runs, err := s.listRuns(ctx, wf)
		if err != nil {
			return err
		}
		fresh[kind] = map[string]map[string]any{}
		for id, r := range runs {
			if terminal(fmt.Sprint(r["status"])) {
				fresh[kind][id] = r
				if kind == "signal" {
					signalRuns = append(signalRuns, id)
				}
			}
		}
	}
	// Attempts and signals are read after the listing: a run listed finished has all of its
	// attempts and consumed signals by now. A run the sweep deleted in between is read no
	// more; an earlier pass saw it (a run is kept for minutes after it ends, a pass runs
	// every interval).
	lost := map[string]int{}
	rows, err := s.db.Query(ctx, `SELECT run_id, block_id, count(*) FROM orchestrator.step_attempts WHERE status = 'lost' GROUP BY 1, 2`)
	if err != nil {
		return fmt.Errorf("lost attempts: %w", err)
	}
	for rows.Next() {
		var run, blk string
		var n int
		if err := rows.Scan(&run, &blk, &n); err != nil {
			rows.Close()
			return fmt.Errorf("lost attempts: %w", err)
		}
		lost[run+"/"+blk] = n
	}
	rows.Close()
	// One statement, so one snapshot: a run the sweep deletes meanwhile is missing from the
	// answer rather than read half gone (its signals seen, its attempts not).
	signals := map[string]signalState{}
	rows, err = s.db.Query(ctx, `SELECT r.id,
			coalesce((SELECT jsonb_object_agg(g.id, g.consumed_by IS NOT NULL) FROM orchestrator.signals g WHERE g.run_id = r.id), '{}'),
			(SELECT count(*) FROM orchestrator.step_attempts a WHERE a.run_id = r.id AND a.block_id = 'gate' AND a.status = 'succeeded')
		FROM orchestrator.runs r WHERE r.id = ANY($1)`, signalRuns)
	if err != nil {
		return fmt.Errorf("signals: %w", err)
	}
	for rows.Next() {
		var run string
		var stored map[string]bool
		var st signalState
		if err := rows.Scan(&run, &stored, &st.waits); err != nil {
			rows.Close()
			return fmt.Errorf("signals: %w", err)
		}
		st.stored, st.consumed = len(stored), map[string]bool{}
		for sid, c := range stored {
			if c {
				st.consumed[sid] = true
			}
		}
		signals[run] = st
	}
	rows.Close()

	a.mu.Lock()
	defer a.mu.Unlock()
	for kind, runs := range fresh {
		if a.runs[kind] == nil {
			a.runs[kind] = map[string]map[string]any{}
		}
		for id, r := range runs {
			a.runs[kind][id] = r
		}
	}
	for k, n := range lost {
		a.lost[k] = max(a.lost[k], n)
	}
	for id, st := range signals {
		a.signals[id] = st
	}
	return nil
}

// gone is the kind's runs the archive holds that runs (the listing now) lacks: deleted by
// the retention sweep after a pass saw them finished.
func (a *archive) gone(kind string, runs map[string]map[string]any) map[string]map[string]any {
	out := map[string]map[string]any{}
	if a == nil {
		return out
	}
	a.mu.Lock()
	defer a.mu.Unlock()
	for id, r := range a.runs[kind] {
		if _, ok := runs[id]; !ok {
			out[id] = r
		}
	}
	return out
}

func (a *archive) lostAttempts(key string) int {
	a.mu.Lock()
	defer a.mu.Unlock()
	return a.lost[key]
}

func (a *archive) signal(id string) signalState {
	a.mu.Lock()
	defer a.mu.Unlock()
	return a.signals[id]
}
