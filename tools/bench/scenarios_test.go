package main

import (
	"context"
	"encoding/json"
	"errors"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
)

func TestBatches(t *testing.T) {
	t.Parallel()

	count := func(ops []map[string]any) map[any]int {
		n := map[any]int{}
		for _, op := range ops {
			n[op["operation_type"]]++
		}
		return n
	}

	t.Run("HundredOps", func(t *testing.T) {
		t.Parallel()
		ops := batch100()
		require.Len(t, ops, 100)
		require.Equal(t, map[any]int{"add": 50, "connect": 49, "update": 1}, count(ops))
		require.Equal(t, ops, batch100(), "every request sends the same batch")
	})

	t.Run("ThousandBlocks", func(t *testing.T) {
		t.Parallel()
		ops := blocks1000()
		require.Len(t, ops, 1999)
		require.Equal(t, map[any]int{"add": 1000, "connect": 999}, count(ops))
		require.Equal(t, "trigger.manual", ops[0]["type"])
		require.Equal(t, map[string]any{"message": "{{ steps.b998.output }}"}, ops[999]["params"])
	})

	t.Run("OneUpdateEachTimeAnotherValue", func(t *testing.T) {
		t.Parallel()
		var first, again struct {
			Ops []map[string]any `json:"ops"`
		}
		require.NoError(t, json.Unmarshal(update1000(0), &first))
		require.NoError(t, json.Unmarshal(update1000(999), &again))
		require.Equal(t, []map[string]any{{
			"operation_type": "update", "block_id": "b1",
			"params": map[string]any{"message": "{{ steps.b0.output }} 0"},
		}}, first.Ops)
		require.Equal(t, "b1", again.Ops[0]["block_id"], "the blocks come round again")
		require.Equal(t, map[string]any{"message": "{{ steps.b0.output }} 999"}, again.Ops[0]["params"], "with a new value")
	})
}

func TestPatchApplied(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name    string
		body    string
		check   func([]byte) error
		wantErr string
	}{
		{"AllAppliedValid", `{"ok":true,"version":7,"summary":"Applied all 1 operation(s) successfully.","skipped_items":[],"validation_errors":[]}`,
			patchApplied(1, 0, true), ""},
		{"InvalidAllowed", `{"ok":true,"version":2,"summary":"Applied all 100 operation(s) successfully.","skipped_items":[],"validation_errors":[{"code":"no_trigger"}]}`,
			patchApplied(100, 2, false), ""},
		{"Skipped", `{"ok":false,"version":2,"summary":"Applied 99 operation(s). 1 skipped: #0 add \"b0\": duplicate_block_id","skipped_items":[{}]}`,
			patchApplied(100, 2, false), "not every op applied: Applied 99"},
		{"FewerOps", `{"ok":true,"version":2,"summary":"Applied all 99 operation(s) successfully.","skipped_items":[]}`,
			patchApplied(100, 2, false), "want all 100 applied"},
		{"PatchedTwice", `{"ok":true,"version":3,"summary":"Applied all 100 operation(s) successfully.","skipped_items":[]}`,
			patchApplied(100, 2, false), "version 3, want 2"},
		{"InvalidNotAllowed", `{"ok":true,"version":9,"summary":"Applied all 1 operation(s) successfully.","validation_errors":[{"code":"unknown_reference"}]}`,
			patchApplied(1, 0, true), `1 validation errors, first {"code":"unknown_reference"}`},
		{"NotJSON", `<html>`, patchApplied(1, 0, true), "decode"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			err := tt.check([]byte(tt.body))
			if tt.wantErr == "" {
				require.NoError(t, err)
				return
			}
			require.ErrorContains(t, err, tt.wantErr)
		})
	}
}

func TestGuardFinding(t *testing.T) {
	t.Parallel()
	ms := func(f float64) time.Duration { return time.Duration(f * float64(time.Millisecond)) }
	a := Stats{TargetRate: 500, P50: ms(1), P99: ms(3)}
	proxyRows := func(direct, through Stats) []Result {
		return []Result{
			{Scenario: "gateway-proxy", Phase: proxyPhaseDirect, Stats: direct},
			{Scenario: "gateway-proxy", Phase: proxyPhaseThrough, Stats: through},
		}
	}

	t.Run("HopTakenOff", func(t *testing.T) {
		t.Parallel()
		b := Stats{TargetRate: 500, P50: ms(2.5), P99: ms(6)}
		hop := proxyOverhead(proxyRows(Stats{P50: ms(1), P99: ms(2)}, Stats{P50: ms(1.4), P99: ms(3)}))
		require.True(t, hop.ok)
		got := guardFinding(a, b, hop)
		require.Contains(t, got, "gateway + guard + rate limit (B − A): p50 +1.500 ms, p99 +3.000 ms at 500/s.")
		require.Contains(t, got, "guard + rate limit ((B − A) − hop): p50 +1.100 ms, p99 +2.000 ms.")
		require.Contains(t, got, "checked against guard + rate limit ((B − A) − hop): p50 MISSED, p99 met.")
	})

	t.Run("WithoutGatewayProxyTheWholeDifferenceCounts", func(t *testing.T) {
		t.Parallel()
		b := Stats{TargetRate: 500, P50: ms(1.5), P99: ms(5)}
		got := guardFinding(a, b, proxyOverhead(nil))
		require.Contains(t, got, "checked against gateway + guard + rate limit (B − A; gateway-proxy did not run before it")
		require.Contains(t, got, "p50 met, p99 met.")
	})

	t.Run("AProxyRunWithErrorsIsNotUsed", func(t *testing.T) {
		t.Parallel()
		require.False(t, proxyOverhead(proxyRows(Stats{StatusErrors: 1}, Stats{})).ok)
	})

	t.Run("ErrorsVoidTheCheck", func(t *testing.T) {
		t.Parallel()
		got := guardFinding(a, Stats{TransportErrors: 3}, hop{})
		require.Contains(t, got, "Target not checked: a phase had errors.")
		require.NotContains(t, got, "met")
	})
}

func TestPatchFinding(t *testing.T) {
	t.Parallel()
	require.Equal(t, "target (issue 4: 100-op batch p99 ≤ 20 ms) at 50/s: p99 19.500 ms, met.",
		patchFinding(Stats{TargetRate: 50, P99: 19500 * time.Microsecond}, "100-op batch", 20*time.Millisecond))
	require.Equal(t, "target (issue 4: x p99 ≤ 100 ms) at 20/s: p99 100.001 ms, MISSED.",
		patchFinding(Stats{TargetRate: 20, P99: 100001 * time.Microsecond}, "x", 100*time.Millisecond))
	require.Contains(t, patchFinding(Stats{StatusErrors: 1}, "x", time.Second), "not checked")
}

func TestForEach(t *testing.T) {
	t.Parallel()

	t.Run("RunsEveryIndex", func(t *testing.T) {
		t.Parallel()
		seen := make([]atomic.Int32, 50)
		require.NoError(t, forEach(t.Context(), len(seen), 4, func(_ context.Context, i int) error {
			seen[i].Add(1)
			return nil
		}))
		for i := range seen {
			require.Equal(t, int32(1), seen[i].Load(), "index %d", i)
		}
	})

	t.Run("StopsAtTheFirstError", func(t *testing.T) {
		t.Parallel()
		boom := errors.New("boom")
		var failed atomic.Bool
		var after atomic.Int32 // calls begun once the failure was decided
		const workers = 2
		err := forEach(t.Context(), 1000, workers, func(_ context.Context, i int) error {
			if failed.Load() {
				after.Add(1)
			}
			if i == 3 {
				failed.Store(true)
				return boom
			}
			return nil
		})
		require.ErrorIs(t, err, boom)
		// A worker checks the context before each call, so only a worker that
		// had already passed that check when the failure was decided can start
		// one more call: at most one per other worker, however slow the machine.
		require.LessOrEqual(t, after.Load(), int32(workers-1))
	})
}
