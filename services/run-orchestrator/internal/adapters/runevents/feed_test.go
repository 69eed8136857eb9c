package runevents_test

import (
	"testing"

	"github.com/stretchr/testify/require"

	"svc.dev/services/run-orchestrator/internal/adapters/runevents"
	"svc.dev/services/run-orchestrator/internal/domain/run"
)

func drain(s *runevents.Subscription) []run.Change {
	var out []run.Change
	for {
		select {
		case c, ok := <-s.Changes():
			if !ok {
				return out
			}
			out = append(out, c)
		default:
			return out
		}
	}
}

func TestFeedFiltersAndKeepsOrder(t *testing.T) {
	t.Parallel()
	f := runevents.New()
	one := f.Subscribe(runevents.Filter{RunID: "run_1"}, 0)
	org := f.Subscribe(runevents.Filter{OrganizationID: "org_a"}, 0)
	all := f.Subscribe(runevents.Filter{}, 0)
	f.Publish([]run.Change{
		{Kind: run.ChangeAttemptStarted, RunID: "run_1", OrganizationID: "org_a", Seq: 1},
		{Kind: run.ChangeAttemptStarted, RunID: "run_2", OrganizationID: "org_b", Seq: 1},
		{Kind: run.ChangeAttemptFinished, RunID: "run_1", OrganizationID: "org_a", Seq: 2},
		{Kind: run.ChangeAttemptStarted, RunID: "run_3", OrganizationID: "org_a", Seq: 1},
	})
	seqs := func(cs []run.Change) []string {
		var out []string
		for _, c := range cs {
			out = append(out, c.RunID+"/"+c.Kind)
		}
		return out
	}
	require.Equal(t, []string{"run_1/attempt.started", "run_1/attempt.finished"}, seqs(drain(one)))
	require.Equal(t, []string{"run_1/attempt.started", "run_1/attempt.finished", "run_3/attempt.started"}, seqs(drain(org)))
	require.Len(t, drain(all), 4)
}

func TestFeedEndsASubscriberThatFallsBehind(t *testing.T) {
	t.Parallel()
	f := runevents.New()
	slow := f.Subscribe(runevents.Filter{}, 2)
	fast := f.Subscribe(runevents.Filter{}, 10)
	f.Publish([]run.Change{{Seq: 1}, {Seq: 2}, {Seq: 3}})
	require.Len(t, drain(slow), 2, "the buffer's worth is delivered, then the channel is closed")
	require.True(t, slow.Lagged())
	_, open := <-slow.Changes()
	require.False(t, open)
	require.Len(t, drain(fast), 3)
	require.False(t, fast.Lagged())

	fast.Close()
	fast.Close()                      // twice is fine
	f.Publish([]run.Change{{Seq: 4}}) // nobody left: nothing blocks
}
