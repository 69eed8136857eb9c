package postgres_test

import (
	"context"
	"encoding/json"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"svc.dev/libs/testkit"
	"svc.dev/libs/wire"
	"svc.dev/services/scheduler/internal/adapters/postgres"
	"svc.dev/services/scheduler/internal/domain/schedule"
	"svc.dev/services/scheduler/migrations"
)

// The FireQueue's locking, against real Postgres: claims and dispatches of concurrent ticks
// never take the same row, and a dispatch holds its fires until its outcomes are stored.
func TestScheduleRepositoryFireQueue(t *testing.T) {
	t.Parallel()

	type testBundle struct {
		repo *postgres.ScheduleRepository
		org  string
		t0   time.Time
	}
	setup := func(t *testing.T, n int) *testBundle {
		t.Helper()
		b := &testBundle{repo: postgres.NewScheduleRepository(testkit.NewSchema(t, migrations.FS)), org: wire.NewID(wire.Organization),
			t0: time.Date(2026, 11, 22, 10, 0, 30, 0, time.UTC)}
		c, err := schedule.ParseCron("* * * * *", "UTC")
		require.NoError(t, err)
		for range n {
			s, err := schedule.New(wire.NewID(wire.Schedule), b.org, wire.NewID(wire.Workflow), c, json.RawMessage(`{"k":1}`), true, b.t0)
			require.NoError(t, err)
			require.NoError(t, b.repo.Add(context.Background(), s))
		}
		return b
	}

	t.Run("ConcurrentClaimsSplitTheDueSchedules", func(t *testing.T) {
		t.Parallel()
		b := setup(t, 60)
		ctx := context.Background()
		fires, err := b.repo.ClaimDue(ctx, b.t0, 100)
		require.NoError(t, err)
		require.Empty(t, fires, "nothing is due before 10:01")

		now := b.t0.Add(2 * time.Minute) // 10:02:30: cutoff 10:02 (10:01 coalesces into it)
		var mu sync.Mutex
		seen := map[string]int{}
		var wg sync.WaitGroup
		for range 6 {
			wg.Go(func() {
				for {
					fires, err := b.repo.ClaimDue(ctx, now, 7)
					if err != nil {
						t.Error(err)
						return
					}
					if len(fires) == 0 {
						return
					}
					mu.Lock()
					for _, f := range fires {
						seen[f.ScheduleID]++
						if !f.Cutoff.Equal(time.Date(2026, 11, 22, 10, 2, 0, 0, time.UTC)) || f.OrganizationID != b.org || string(f.Input) != `{"k": 1}` {
							t.Errorf("unexpected fire %+v", f)
						}
					}
					mu.Unlock()
				}
			})
		}
		wg.Wait()
		require.Len(t, seen, 60)
		for id, n := range seen {
			require.Equal(t, 1, n, id)
		}
		s, err := b.repo.Get(ctx, b.org, firstKey(seen))
		require.NoError(t, err)
		require.Equal(t, time.Date(2026, 11, 22, 10, 2, 0, 0, time.UTC), s.LastFiredAt())
		require.Equal(t, time.Date(2026, 11, 22, 10, 3, 0, 0, time.UTC), s.NextFireAt())
	})

	t.Run("DispatchHoldsItsFiresAndStoresOutcomes", func(t *testing.T) {
		t.Parallel()
		b := setup(t, 3)
		ctx := context.Background()
		now := b.t0.Add(time.Minute)
		fires, err := b.repo.ClaimDue(ctx, now, 10)
		require.NoError(t, err)
		require.Len(t, fires, 3)

		inside, release := make(chan struct{}), make(chan struct{})
		done := make(chan int)
		go func() {
			n, err := b.repo.DispatchPending(ctx, now, 10, func(_ context.Context, fs []schedule.Fire) []schedule.Outcome {
				close(inside)
				<-release
				out := make([]schedule.Outcome, len(fs))
				for i, f := range fs {
					switch i {
					case 0:
						out[i] = schedule.Outcome{Fire: f, RunID: "run_1"}
					case 1:
						out[i] = schedule.Outcome{Fire: f, Code: schedule.CodeWorkflowNotFound}
					default:
						out[i] = schedule.Outcome{Fire: f, Code: schedule.CodeDispatchFailed}
					}
				}
				return out
			})
			if err != nil {
				t.Error(err)
			}
			done <- n
		}()
		<-inside
		// While the first dispatch holds them, another finds nothing to take.
		n, err := b.repo.DispatchPending(ctx, now, 10, func(context.Context, []schedule.Fire) []schedule.Outcome {
			t.Error("a locked fire was handed out twice")
			return nil
		})
		require.NoError(t, err)
		require.Zero(t, n)
		close(release)
		require.Equal(t, 3, <-done)

		// Only the retried one is pending, and only once its delay has passed.
		n, err = b.repo.DispatchPending(ctx, now, 10, func(context.Context, []schedule.Fire) []schedule.Outcome { return nil })
		require.NoError(t, err)
		require.Zero(t, n)
		var retried []schedule.Fire
		_, err = b.repo.DispatchPending(ctx, now.Add(schedule.RetryDelay(1)), 10, func(_ context.Context, fs []schedule.Fire) []schedule.Outcome {
			retried = fs
			out := make([]schedule.Outcome, len(fs))
			for i, f := range fs {
				out[i] = schedule.Outcome{Fire: f, RunID: "run_3"}
			}
			return out
		})
		require.NoError(t, err)
		require.Len(t, retried, 1)
		require.Equal(t, 1, retried[0].Attempts)

		// The fire whose workflow is gone disabled its schedule.
		disabled := 0
		for _, f := range fires {
			s, err := b.repo.Get(ctx, b.org, f.ScheduleID)
			require.NoError(t, err)
			if !s.Enabled() {
				disabled++
			}
		}
		require.Equal(t, 1, disabled)
	})
}

func firstKey(m map[string]int) string {
	for k := range m {
		return k
	}
	return ""
}
