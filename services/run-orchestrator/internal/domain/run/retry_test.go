package run_test

import (
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"svc.dev/services/run-orchestrator/internal/domain/run"
)

// Retries by connector policy, and their interplay with lost attempts.

// ---- retries by connector policy ---------------------------------------------------------------

func TestRetries(t *testing.T) {
	t.Parallel()
	h := newHarness(t, failDef, nil)
	o := h.succeed(1, h.start(), `{}`, at(0))
	st := *o.Start
	require.Equal(t, "f", st.Block.ID)
	require.Equal(t, map[string]any{"message": "boom"}, st.Params)

	// Attempt 1 fails: attempt 2 is due 100 ms later, the job keeps the run.
	now := at(1000)
	o = h.fail(1, st, "boom", now)
	require.Equal(t, &run.Retry{Block: "f", Attempt: 2, At: now.Add(100 * time.Millisecond)}, o.Retry)
	require.False(t, o.CompleteJob)
	require.Nil(t, o.Start)
	require.Nil(t, o.Finish)
	require.Equal(t, []string{"f"}, o.Changed)
	require.Equal(t, []string{"attempt.finished:f:failed", "retry.scheduled:f"}, kinds(o.Changes))
	require.Equal(t, []int64{5, 5}, seqs(o.Changes))
	require.Equal(t, 2, o.Changes[1].Attempt)
	require.Equal(t, now.Add(100*time.Millisecond), o.Changes[1].RetryAt)
	require.JSONEq(t, `{"message":"boom"}`, string(o.Ended[0].Error))
	require.Equal(t, now.Add(100*time.Millisecond), h.block("f").RetryAt)
	require.Equal(t, run.BlockRunning, h.block("f").Status)
	require.False(t, h.block("f").InFlight)
	require.Equal(t, run.StatusRunning, h.r.Status)

	// RetryDue starts attempt 2.
	o = h.apply(run.RetryDue{JobEvent: job(1), Block: "f", Now: o.Retry.At})
	require.NotNil(t, o.Start)
	require.Equal(t, 2, o.Start.Attempt)
	require.Equal(t, "att_3", o.Start.ID)
	require.Equal(t, int64(6), o.Start.Seq)
	require.True(t, h.block("f").RetryAt.IsZero())

	// Attempt 2 fails (a timeout): 200 ms.
	now = at(2000)
	o = h.apply(run.Failed{JobEvent: job(1), Block: "f", AttemptID: o.Start.ID, Message: "deadline", Code: run.CodeTimeout, Now: now})
	require.Equal(t, &run.Retry{Block: "f", Attempt: 3, At: now.Add(200 * time.Millisecond)}, o.Retry)
	require.JSONEq(t, `{"message":"deadline","code":"timeout"}`, string(o.Ended[0].Error))
	o = h.apply(run.RetryDue{JobEvent: job(1), Block: "f", Now: o.Retry.At})

	// Attempt 3 is the last of max_attempts 3: the run fails, no new step starts.
	o = h.fail(1, *o.Start, "boom 3", at(3000))
	require.Nil(t, o.Retry)
	require.True(t, o.CompleteJob)
	require.Equal(t, run.StatusFailed, h.r.Status)
	require.Equal(t, run.StatusFailed, o.Finish.Status)
	require.JSONEq(t, `{"block_id":"f","message":"boom 3"}`, string(o.Finish.Error))
	require.Equal(t, []string{"attempt.finished:f:failed", "run.status:failed"}, kinds(o.Changes))
	require.Equal(t, run.BlockFailed, h.block("f").Status)
	require.Equal(t, run.BlockPending, h.r.State.Block("after").Status)
}

// Retries follow the policy of the block's connector: the delay grows by the coefficient up to
// the max, and max_attempts bounds them.
func TestRetryDelaysByConnector(t *testing.T) {
	t.Parallel()
	tests := []struct {
		typ    string
		params string
		delays []time.Duration // between attempt n's failure and attempt n+1
	}{
		{"fail", `{"message":"x"}`, []time.Duration{100 * time.Millisecond, 200 * time.Millisecond}},
		{"http.request", `{"method":"GET","url":"https://example.com"}`, []time.Duration{500 * time.Millisecond, time.Second}},
		{"log", `{"message":"x"}`, nil},
		{"transform", `{"value":1}`, nil},
		{"wait", `{"duration":"1s"}`, nil},
		{"condition", `{"expression":"true"}`, nil},
		{"no.such.type", `{}`, nil},
	}
	for _, tc := range tests {
		t.Run(tc.typ, func(t *testing.T) {
			t.Parallel()
			def := `{"blocks":[{"block_id":"t","type":"trigger.manual","params":{}},{"block_id":"b","type":"` + tc.typ + `","params":` + tc.params + `}],
				"edges":[{"block_id":"t","target_block_id":"b"}]}`
			h := newHarness(t, def, nil)
			o := h.succeed(1, h.start(), `{}`, at(0))
			now := at(10_000)
			for i, d := range tc.delays {
				o = h.fail(1, *o.Start, "no", now)
				require.NotNil(t, o.Retry, "attempt %d", i+1)
				require.Equal(t, now.Add(d), o.Retry.At)
				require.Equal(t, i+2, o.Retry.Attempt)
				now = now.Add(time.Minute)
				o = h.apply(run.RetryDue{JobEvent: job(1), Block: "b", Now: now})
			}
			o = h.fail(1, *o.Start, "no", now)
			require.Nil(t, o.Retry)
			require.Equal(t, run.StatusFailed, h.r.Status)
			require.Equal(t, len(tc.delays)+1, h.block("b").Attempts)
		})
	}
}

// RetryDue applies only to the job holding the block between retries.
func TestRetryDueThatNoLongerApplies(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name  string
		setup func(h *harness, st run.StartAttempt) run.RetryDue
	}{
		{"another job", func(h *harness, st run.StartAttempt) run.RetryDue {
			h.fail(1, st, "x", at(1))
			return run.RetryDue{JobEvent: job(2), Block: "f", Now: at(200)}
		}},
		{"not between retries", func(_ *harness, _ run.StartAttempt) run.RetryDue {
			return run.RetryDue{JobEvent: job(1), Block: "f", Now: at(200)}
		}},
		{"unknown block", func(h *harness, st run.StartAttempt) run.RetryDue {
			h.fail(1, st, "x", at(1))
			return run.RetryDue{JobEvent: job(1), Block: "nope", Now: at(200)}
		}},
		{"cancelled meanwhile", func(h *harness, st run.StartAttempt) run.RetryDue {
			h.fail(1, st, "x", at(1))
			h.apply(run.CancelRequested{Now: at(50)})
			return run.RetryDue{JobEvent: job(1), Block: "f", Now: at(200)}
		}},
		{"twice", func(h *harness, st run.StartAttempt) run.RetryDue {
			h.fail(1, st, "x", at(1))
			h.apply(run.RetryDue{JobEvent: job(1), Block: "f", Now: at(101)})
			return run.RetryDue{JobEvent: job(1), Block: "f", Now: at(102)}
		}},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			h := newHarness(t, failDef, nil)
			o := h.succeed(1, h.start(), `{}`, at(0))
			ev := tc.setup(h, *o.Start)
			before := snapshot(h.r)
			o = h.apply(ev)
			require.Equal(t, run.Outcome{}, o)
			require.Equal(t, before, snapshot(h.r))
		})
	}
}

// Lost attempts do not count against max_attempts; 10 attempts of any kind stop the step.
func TestRetriesWithLostAttempts(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name   string
		script string // per attempt: L lost (sweeper), R lost (job's try failed), F failed
		// want: after the script, "retry" (a retry is scheduled), "running" (the block runs
		// again), or "failed" with the message.
		want    string
		message string
	}{
		{name: "one lost, three failures", script: "LFFF", want: "failed", message: "boom"},
		{name: "one lost, two failures retry", script: "LFF", want: "retry"},
		{name: "lost by a failed try", script: "RFF", want: "retry"},
		{name: "seven lost, two failures: a tenth attempt", script: "LLLRLLLFF", want: "retry"},
		{name: "nine lost, the tenth attempt fails: the cap", script: "LLLLLLLLLF", want: "failed", message: "boom"},
		{name: "the tenth attempt lost", script: "LLLLLLLLLL", want: "failed", message: "step stopped after 10 attempts (the last was lost: its replica stopped heartbeating)"},
		{name: "the tenth attempt lost by a failed try", script: "FFLLLLLLLR", want: "failed", message: "step stopped after 10 attempts (the last was lost: its job's try failed mid-step)"},
		{name: "nine attempts of any kind", script: "LLLLLLLFF", want: "retry"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			h := newHarness(t, failDef, nil)
			o := h.succeed(1, h.start(), `{}`, at(0))
			jobID, try := int64(1), 1
			now := at(100)
			for i, step := range tc.script {
				now = now.Add(time.Second)
				require.NotNil(t, o.Start, "attempt %d", i+1)
				require.Equal(t, i+1, o.Start.Attempt)
				st := *o.Start
				switch step {
				case 'F':
					o = h.apply(run.Failed{JobEvent: run.JobEvent{Job: jobID, Try: try}, Block: "f", AttemptID: st.ID, Message: "boom", Now: now})
					if o.Retry != nil {
						o = h.apply(run.RetryDue{JobEvent: run.JobEvent{Job: jobID, Try: try}, Block: "f", Now: o.Retry.At})
					}
				case 'L':
					o = h.apply(run.AttemptsLost{Attempts: []run.LostAttempt{{Block: "f", AttemptID: st.ID, Replica: "r1"}}, DeadJobs: []int64{jobID}, Now: now})
					require.Len(t, o.Ended, 1)
					require.Equal(t, "lost", o.Ended[0].Status)
					if o.Finish == nil {
						require.Equal(t, 1, o.NewJobs)
						jobID, try = jobID+1, 1
						o = h.apply(run.Advance{JobEvent: run.JobEvent{Job: jobID, Try: try}, Now: now})
					}
				case 'R':
					try++
					o = h.apply(run.Advance{JobEvent: run.JobEvent{Job: jobID, Try: try}, Now: now})
					require.Equal(t, "lost", o.Ended[0].Status)
				}
			}
			b := h.block("f")
			switch tc.want {
			case "retry":
				require.NotNil(t, o.Start, "the block runs again")
				require.Equal(t, run.StatusRunning, h.r.Status)
			case "failed":
				require.Equal(t, run.StatusFailed, h.r.Status)
				require.Equal(t, run.BlockFailed, b.Status)
				require.Equal(t, tc.message, errorOf(t, o.Finish.Error)["message"])
			}
			require.LessOrEqual(t, b.Attempts, run.MaxAttemptsAnyKind)
			require.Equal(t, strings.Count(tc.script, "L")+strings.Count(tc.script, "R"), b.Lost)
		})
	}
}
