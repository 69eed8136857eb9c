package run_test

import (
	"encoding/json"
	"testing"

	"github.com/stretchr/testify/require"

	"svc.dev/services/run-orchestrator/internal/domain/run"
)

// Results that no longer apply, and the changes a run publishes with their sequence.

// ---- results that no longer apply --------------------------------------------------------------------

func TestStaleResultsAreIgnored(t *testing.T) {
	t.Parallel()
	type stale func(h *harness, st run.StartAttempt) run.Event
	tests := []struct {
		name string
		ev   stale
	}{
		{"succeeded from another job", func(_ *harness, st run.StartAttempt) run.Event {
			return run.Succeeded{JobEvent: job(2), Block: "a", AttemptID: st.ID, Output: json.RawMessage(`{}`), Now: at(9)}
		}},
		{"succeeded of another attempt", func(_ *harness, _ run.StartAttempt) run.Event {
			return run.Succeeded{JobEvent: job(1), Block: "a", AttemptID: "att_99", Output: json.RawMessage(`{}`), Now: at(9)}
		}},
		{"succeeded of another block", func(_ *harness, st run.StartAttempt) run.Event {
			return run.Succeeded{JobEvent: job(1), Block: "t", AttemptID: st.ID, Output: json.RawMessage(`{}`), Now: at(9)}
		}},
		{"succeeded of an unknown block", func(_ *harness, st run.StartAttempt) run.Event {
			return run.Succeeded{JobEvent: job(1), Block: "nope", AttemptID: st.ID, Output: json.RawMessage(`{}`), Now: at(9)}
		}},
		{"failed from another job", func(_ *harness, st run.StartAttempt) run.Event {
			return run.Failed{JobEvent: job(2), Block: "a", AttemptID: st.ID, Message: "x", Now: at(9)}
		}},
		{"failed of an earlier attempt", func(_ *harness, _ run.StartAttempt) run.Event {
			return run.Failed{JobEvent: job(1), Block: "t", AttemptID: "att_1", Message: "x", Now: at(9)}
		}},
		{"suspended from another job", func(_ *harness, st run.StartAttempt) run.Event {
			return run.Suspended{JobEvent: job(2), Block: "a", AttemptID: st.ID, Wait: run.WaitRequest{Kind: run.WaitSleep, WakeAt: at(100)}, Now: at(9)}
		}},
		{"suspended with a stale signal", func(_ *harness, _ run.StartAttempt) run.Event {
			return run.Suspended{JobEvent: job(1), Block: "t", AttemptID: "att_1", Wait: run.WaitRequest{Kind: run.WaitSignal, Signal: "s"},
				Buffered: &run.Signal{ID: "sig_1", Name: "s"}, Now: at(9)}
		}},
		{"timer of a block that is not waiting", func(_ *harness, _ run.StartAttempt) run.Event {
			return run.TimerFired{Block: "a", Now: at(9)}
		}},
		{"timer of an unknown block", func(_ *harness, _ run.StartAttempt) run.Event {
			return run.TimerFired{Block: "nope", Now: at(9)}
		}},
		{"retry due of a block in flight", func(_ *harness, _ run.StartAttempt) run.Event {
			return run.RetryDue{JobEvent: job(1), Block: "a", Now: at(9)}
		}},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			h := newHarness(t, linearDef, nil)
			o := h.succeed(1, h.start(), `{}`, at(0))
			st := *o.Start
			before, seq := snapshot(h.r), h.r.Seq
			o = h.apply(tc.ev(h, st))
			require.Equal(t, run.Outcome{}, o)
			require.Equal(t, before, snapshot(h.r))
			require.Equal(t, seq, h.r.Seq)
			require.Equal(t, run.StatusRunning, h.r.Status)
		})
	}
}

// ---- changes and their sequence ---------------------------------------------------------------------

// The changes of a whole run, in order: every attempt change takes the next sequence, the
// other kinds carry the latest attempt change's.
func TestChangesOfAWholeRun(t *testing.T) {
	t.Parallel()
	h := newHarness(t, `{"blocks":[
		{"block_id":"t","type":"trigger.manual","params":{}},
		{"block_id":"f","type":"fail","params":{"message":"x","fail_attempts":1}},
		{"block_id":"w","type":"wait","params":{"duration":"1s"}}
	],"edges":[{"block_id":"t","target_block_id":"f"},{"block_id":"f","target_block_id":"w"}]}`, nil)
	var all []run.Change
	var changed [][]string
	record := func(o run.Outcome) run.Outcome {
		all = append(all, o.Changes...)
		changed = append(changed, o.Changed)
		return o
	}
	o := record(h.apply(run.Advance{JobEvent: job(1), Now: at(0)}))
	o = record(h.succeed(1, *o.Start, `{}`, at(1)))
	o = record(h.fail(1, *o.Start, "x", at(2)))
	o = record(h.apply(run.RetryDue{JobEvent: job(1), Block: "f", Now: o.Retry.At}))
	o = record(h.succeed(1, *o.Start, `{"ok":true}`, at(200)))
	record(h.apply(run.Suspended{JobEvent: job(1), Block: "w", AttemptID: o.Start.ID, Wait: run.WaitRequest{Kind: run.WaitSleep, WakeAt: at(1200)}, Now: at(201)}))
	record(h.apply(run.TimerFired{Block: "w", Now: at(1200)}))
	record(h.apply(run.Advance{JobEvent: job(2), Now: at(1201)}))

	require.Equal(t, []string{
		"attempt.started:t:running", "run.status:running",
		"attempt.finished:t:succeeded", "attempt.started:f:running",
		"attempt.finished:f:failed", "retry.scheduled:f",
		"attempt.started:f:running",
		"attempt.finished:f:succeeded", "attempt.started:w:running",
		"wait.armed:w", "run.status:waiting",
		"wait.released:w", "attempt.finished:w:succeeded", "run.status:running",
		"run.status:completed",
	}, kinds(all))
	require.Equal(t, []int64{1, 2, 3, 4, 5, 5, 6, 7, 8, 8, 9, 9, 10, 11, 12}, seqs(all))
	require.Equal(t, [][]string{{"t"}, {"t", "f"}, {"f"}, {"f"}, {"f", "w"}, {"w"}, {"w"}, nil}, changed)
	require.Equal(t, int64(12), h.r.Seq)
	for _, c := range all {
		require.Equal(t, "run_1", c.RunID)
		require.Equal(t, "org_1", c.OrganizationID)
		require.Equal(t, "wf_1", c.WorkflowID)
	}
	require.Equal(t, at(1201), all[len(all)-1].At)
}

// Outcome.Changed lists exactly the blocks whose stored state changed, whatever the event
// (the tracker checks it after every event of every test; here a few cases by name).
func TestChangedListsExactlyTheBlocksThatChanged(t *testing.T) {
	t.Parallel()
	h := newHarness(t, branchDef, map[string]any{"n": 1})
	o := h.succeed(1, h.start(), `{}`, at(0))
	require.Equal(t, []string{"t", "c"}, o.Changed)
	o = h.succeed(1, *o.Start, `{"result":false}`, at(1))
	require.Equal(t, []string{"c", "yes", "no"}, o.Changed, "c succeeded, yes skipped, no started")
	before := snapshot(h.r)
	require.Empty(t, h.apply(run.SignalArrived{Signal: run.Signal{ID: "s", Name: "x"}, Now: at(2)}).Changed)
	require.Equal(t, before, snapshot(h.r))
}
