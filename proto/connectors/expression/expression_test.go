package expression_test

import (
	"errors"
	"runtime"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"svc.dev/proto/connectors/expression"
)

// full is about the engine's default full budget.
func full() expression.Limits {
	return expression.Limits{Timeout: time.Second, Bytes: 16 << 20}
}

func run(t *testing.T, src string, scope map[string]any, b *expression.Budget) (any, error) {
	t.Helper()
	p, err := expression.Compile(src)
	require.NoError(t, err)
	if scope == nil {
		scope = map[string]any{}
	}
	return p.Run(scope, b)
}

func requireLimit(t *testing.T, err error, code string) {
	t.Helper()
	require.Error(t, err)
	le := expression.AsLimit(err)
	require.NotNil(t, le, "not a limit error: %v", err)
	require.Equal(t, code, le.Code)
}

func TestOrdinaryExpressions(t *testing.T) {
	t.Parallel()
	scope := func() map[string]any {
		return map[string]any{
			"input": map[string]any{"name": "Ada", "n": float64(3), "items": []any{float64(1), float64(2), float64(3)}},
			"steps": map[string]any{"a": map[string]any{"output": map[string]any{"x": "y"}}},
		}
	}
	for _, tc := range []struct {
		src  string
		want any
	}{
		{`input.name + "!"`, "Ada!"},
		{`input.n + 1`, float64(4)},
		{`1 + 2`, 3},
		{`upper(input.name)`, "ADA"},
		{`repeat("ab", 3)`, "ababab"},
		{`join(map(input.items, string(#)), ",")`, "1,2,3"},
		{`filter(input.items, # > 1)`, []any{float64(2), float64(3)}},
		{`reduce(input.items, #acc + #, 0)`, float64(6)},
		{`sum(1..4)`, 10},
		{`len(split("a,b,c", ","))`, 3},
		{`replace("aaa", "a", "bb")`, "bbbbbb"},
		{`toJSON([1])`, "[\n  1\n]"},
		{`fromJSON("[1]")`, []any{float64(1)}},
		{`steps.a.output.x`, "y"},
		{`input.missing`, nil},
		{`sortBy(input.items, -#)`, []any{float64(3), float64(2), float64(1)}},
		{`count(input.items, # > 1) == 2 && all(input.items, # > 0)`, true},
		{`flatten([[1], [2, [3]]])`, []any{1, 2, 3}},
		{`concat([1], [2])`, []any{1, 2}},
	} {
		got, err := run(t, tc.src, scope(), expression.NewBudget(full()))
		require.NoError(t, err, tc.src)
		require.Equal(t, tc.want, got, tc.src)
	}
}

// heapAfter runs f and returns how much the live heap grew at its peak, roughly: the
// allocation total between two GCs bounds what f held.
func allocated(f func()) uint64 {
	var before, after runtime.MemStats
	runtime.GC()
	runtime.ReadMemStats(&before)
	f()
	runtime.ReadMemStats(&after)
	return after.TotalAlloc - before.TotalAlloc
}

// TestRepeatBombIsRefusedBeforeAllocating is issue 21's first finding: the nested repeat
// asked the runtime for ~100 GB (the process died), and 200 instead of 100000 took it to
// ~430 MiB before expr-lang's own budget, checked after the allocation, said no.
func TestRepeatBombIsRefusedBeforeAllocating(t *testing.T) {
	// Not parallel: it measures the process's allocations.
	for _, src := range []string{
		`repeat(repeat('a', 999999), 100000)`,
		`repeat(repeat('a', 999999), 200)`,
		`reduce(1..40, #acc + #acc, "a")`,
		`join(map(1..1000, repeat("x", 100000)), "")`,
		`toJSON(map(1..200, repeat("\u0001", 100000)))`,
		`replace(repeat("a", 100000), "a", repeat("b", 1000))`,
		`1..100000000`,
	} {
		var err error
		start := time.Now()
		n := allocated(func() { _, err = run(t, src, nil, expression.NewBudget(full())) })
		requireLimit(t, err, expression.CodeBudgetExceeded)
		require.Less(t, n, uint64(64<<20), "%s allocated %d MiB", src, n>>20)
		require.Less(t, time.Since(start), 2*time.Second, src)
	}
}

// TestBudgetIsSharedAcrossEvaluations: each {{ }} got a fresh budget, so a param with many
// segments had no total bound.
func TestBudgetIsSharedAcrossEvaluations(t *testing.T) {
	t.Parallel()
	b := expression.NewBudget(expression.Limits{Bytes: 1 << 20})
	p, err := expression.Compile(`repeat("a", 300000)`)
	require.NoError(t, err)
	scope := map[string]any{}
	for range 3 {
		_, err = p.Run(scope, b)
		require.NoError(t, err)
	}
	_, err = p.Run(scope, b)
	requireLimit(t, err, expression.CodeBudgetExceeded)
	// Sticky: a cheap evaluation after it fails too.
	_, err = run(t, `1`, nil, b)
	requireLimit(t, err, expression.CodeBudgetExceeded)
}

// TestQuadraticLoopStopsOnTime is the second finding: a reduce inside a reduce over a big
// input held a core for seconds.
func TestQuadraticLoopStopsOnTime(t *testing.T) {
	t.Parallel()
	items := make([]any, 120000)
	for i := range items {
		items[i] = float64(i)
	}
	scope := map[string]any{"input": map[string]any{"a": items}}
	start := time.Now()
	_, err := run(t, `reduce(input.a, reduce(input.a, #acc + 1, 0), 0)`, scope,
		expression.NewBudget(expression.Limits{Timeout: 200 * time.Millisecond}))
	requireLimit(t, err, expression.CodeBudgetExceeded)
	require.Less(t, time.Since(start), time.Second)

	// A step bound stops it deterministically, as the small inline budget does.
	_, err = run(t, `reduce(input.a, reduce(input.a, #acc + 1, 0), 0)`, scope,
		expression.NewBudget(expression.Limits{Steps: 10000, Inline: true}))
	requireLimit(t, err, expression.CodeBudgetExceeded)
	require.True(t, expression.AsLimit(err).Inline)

	// An inner loop without a closure (sum) in an outer one is stopped by the clock.
	start = time.Now()
	_, err = run(t, `map(input.a, sum(input.a))`, scope, expression.NewBudget(expression.Limits{Timeout: 100 * time.Millisecond}))
	requireLimit(t, err, expression.CodeBudgetExceeded)
	require.Less(t, time.Since(start), time.Second)
}

func TestOutputBound(t *testing.T) {
	t.Parallel()
	b := expression.NewBudget(expression.Limits{Bytes: 1000})
	require.NoError(t, b.OutputOf(strings.Repeat("a", 900)))
	requireLimit(t, b.OutputOf(map[string]any{"k": strings.Repeat("a", 200)}), expression.CodeOutputTooLarge)
}

func TestBudgetCannotBeReachedFromAnExpression(t *testing.T) {
	t.Parallel()
	b := expression.NewBudget(expression.Limits{Bytes: 100})
	// The scope (and the meter in it) is readable through $env, but has nothing to call.
	_, err := run(t, `$env["budget$"].Reset()`, nil, b)
	require.Error(t, err)
	require.Nil(t, expression.AsLimit(err))
	_, err = run(t, `repeat("a", 1000)`, nil, b)
	requireLimit(t, err, expression.CodeBudgetExceeded)
}

func TestCheck(t *testing.T) {
	t.Parallel()
	require.NoError(t, expression.Check(`map(input.a, filter(#.b, # > 1))`))
	require.NoError(t, expression.Check(`reduce(input.a, reduce(input.a, #acc + 1, 0), 0)`))
	require.NoError(t, expression.Check(`not parsed (`)) // the parser's error is reported elsewhere
	for _, src := range []string{
		`map(a, map(b, map(c, map(d, 1))))`,
		strings.Repeat("1 + ", 600) + "1",
		strings.Repeat("a", expression.MaxSourceBytes+1),
	} {
		err := expression.Check(src)
		require.ErrorIs(t, err, expression.ErrTooLarge, src[:min(len(src), 40)])
		_, err = expression.Compile(src)
		require.ErrorIs(t, err, expression.ErrTooLarge)
	}
	require.True(t, errors.Is(expression.Check(`map(a, map(b, map(c, map(d, 1))))`), expression.ErrTooLarge))
}
