package command

import (
	"context"
	"testing"
	"time"
)

// fullBatches is a retention store with a backlog: every batch is full until left runs out.
type fullBatches struct {
	left, calls int
}

func (f *fullBatches) DeleteExpired(_ context.Context, _ time.Duration, batch int) (int, error) {
	f.calls++
	n := min(batch, f.left)
	f.left -= n
	return n, nil
}

func (f *fullBatches) DeleteUnusedDefinitions(context.Context) (int, error) { return 0, nil }

func (f *fullBatches) Override(context.Context, string) (time.Duration, time.Time, error) {
	return 0, time.Time{}, nil
}

func (f *fullBatches) SetOverride(context.Context, string, time.Duration) (time.Time, error) {
	return time.Time{}, nil
}

// TestSweepPausesToItsRate: with a rate, the sweep pauses after each full batch for what the
// batch's runs take at that rate (less the batch's own time) and not after the last, partial
// one; without a rate it does not pause; and a pause never runs past the sweep's budget.
func TestSweepPausesToItsRate(t *testing.T) {
	for _, tc := range []struct {
		name         string
		rate         int
		budget       time.Duration
		wantBatches  int
		wantPauses   int
		maxPause     time.Duration
		wantCaughtUp bool
	}{
		{name: "paced", rate: 1000, budget: time.Hour, wantBatches: 4, wantPauses: 3, maxPause: 500 * time.Millisecond, wantCaughtUp: true},
		{name: "unpaced", rate: 0, budget: time.Hour, wantBatches: 4, wantPauses: 0, wantCaughtUp: true},
		// 500 runs at 1 a second would rest 500 s: the budget (100 ms) cuts the pause, and the
		// sweep ends after it, leaving the rest to the next sweep.
		{name: "within the budget", rate: 1, budget: 100 * time.Millisecond, wantBatches: 1, wantPauses: 1, maxPause: 100 * time.Millisecond},
	} {
		t.Run(tc.name, func(t *testing.T) {
			store := &fullBatches{left: 1700}
			h, err := NewSweepRetentionHandler(store, SweepConfig{Server: time.Hour, Batch: 500, Budget: tc.budget, Rate: tc.rate})
			if err != nil {
				t.Fatal(err)
			}
			var pauses []time.Duration
			h.pause = func(ctx context.Context, d time.Duration) {
				pauses = append(pauses, d)
				if tc.budget < time.Hour {
					sleep(ctx, d) // the budget is the handler's own clock: let it pass
				}
			}
			res, err := h.Handle(context.Background())
			if err != nil {
				t.Fatal(err)
			}
			if res.Batches != tc.wantBatches || len(pauses) != tc.wantPauses || res.CaughtUp != tc.wantCaughtUp {
				t.Fatalf("batches %d, pauses %v, caught up %v; want %d batches, %d pauses, caught up %v", res.Batches, pauses, res.CaughtUp,
					tc.wantBatches, tc.wantPauses, tc.wantCaughtUp)
			}
			for _, p := range pauses {
				if p <= 0 || p > tc.maxPause {
					t.Fatalf("pause %s: want within (0, %s]", p, tc.maxPause)
				}
			}
		})
	}
}

func TestRestIsWhatTheBatchTakesAtTheRate(t *testing.T) {
	h := SweepRetentionHandler{cfg: SweepConfig{Rate: 2000}}
	for _, tc := range []struct {
		n    int
		took time.Duration
		want time.Duration
	}{
		{500, 0, 250 * time.Millisecond},
		{500, 100 * time.Millisecond, 150 * time.Millisecond},
		{500, 300 * time.Millisecond, 0}, // slower than the rate already
		{0, 0, 0},
	} {
		if got := h.rest(tc.n, tc.took); got != tc.want {
			t.Errorf("rest(%d, %s) = %s, want %s", tc.n, tc.took, got, tc.want)
		}
	}
	if got := (SweepRetentionHandler{}).rest(500, 0); got != 0 {
		t.Errorf("no rate: rest = %s, want 0", got)
	}
}
