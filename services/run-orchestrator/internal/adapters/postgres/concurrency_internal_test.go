package postgres

import (
	"testing"

	"github.com/stretchr/testify/require"

	"svc.dev/services/run-orchestrator/internal/domain/run"
)

// TestReleaseCostsNothingWithoutALimit: the end of a run of a workflow without concurrency
// makes no statement (the transaction is nil: any statement would panic), nor does the end of
// a run held back that never held a slot, nor a step that does not end the run.
func TestReleaseCostsNothingWithoutALimit(t *testing.T) {
	t.Parallel()
	s := &RunStore{}
	ended := &run.Outcome{Changes: []run.Change{{Kind: run.ChangeStatus, Status: run.StatusCompleted}}}
	step := &run.Outcome{Changes: []run.Change{{Kind: run.ChangeStatus, Status: run.StatusRunning}}}
	g := &group{org: "org_a", workflow: "wf_a", key: "k", limit: 1}
	for name, tc := range map[string]struct {
		l *Locked
		o *run.Outcome
	}{
		"NoLimit":        {&Locked{run: &run.Run{ID: "run_a"}, admitted: true, status: run.StatusRunning}, ended},
		"NeverAdmitted":  {&Locked{run: &run.Run{ID: "run_a"}, group: g, status: run.StatusQueued}, ended},
		"NotEnded":       {&Locked{run: &run.Run{ID: "run_a"}, group: g, admitted: true, status: run.StatusRunning}, step},
		"AlreadyEnded":   {&Locked{run: &run.Run{ID: "run_a"}, group: g, admitted: true, status: run.StatusCompleted}, ended},
		"NothingChanged": {&Locked{run: &run.Run{ID: "run_a"}, group: g, admitted: true, status: run.StatusRunning}, &run.Outcome{}},
	} {
		changes, err := s.release(t.Context(), nil, tc.l, tc.o)
		require.NoError(t, err, name)
		require.Nil(t, changes, name)
	}
}

func TestSortGroupsTakesLocksInOneOrder(t *testing.T) {
	t.Parallel()
	a := group{org: "o", workflow: "w", key: "a", limit: 1}
	b := group{org: "o", workflow: "w", key: "b", limit: 1}
	a2 := a
	a2.limit = 5
	got := sortGroups([]group{b, a, a2, b})
	require.Len(t, got, 2, "one lock per group")
	require.Less(t, got[0].lockID(), got[1].lockID())
	for _, g := range got {
		if g.key == "a" {
			require.Equal(t, 5, g.limit, "the highest limit is kept")
		}
	}
}
