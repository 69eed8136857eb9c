// Package executors runs attempts: one executor per block type of the connector catalog. An
// executor gets an attempt's resolved params and returns an output or a wait; it never
// touches the run's storage (the engine records what it returns).
package executors

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"strconv"
	"time"
)

// Call is what an executor gets for one attempt.
type Call struct {
	RunID   string
	BlockID string
	Attempt int
	// Params are the block's params with templates resolved (x-expression params stay raw).
	Params map[string]any
	// Input is the run input, decoded.
	Input any
	// Scope is the template scope: input, steps.<id>.output, run.id, workflow.id.
	Scope map[string]any
	// Eval evaluates an expr-lang expression in a scope (the interpreter's templates).
	Eval func(src string, scope map[string]any) (any, error)
}

// Result is an attempt's outcome: an output, or a wait that suspends the run.
type Result struct {
	Output any
	Wait   *WaitSpec
}

// WaitSpec is a suspension asked for by a wait block.
type WaitSpec struct {
	Kind   string // "sleep" or "signal"
	WakeAt time.Time
	Signal string
	// Timeout bounds a signal wait; zero means none.
	Timeout time.Duration
}

// Executor runs one attempt of one block type.
type Executor interface {
	Execute(ctx context.Context, c Call) (Result, error)
}

// ExecutorFunc adapts a function to Executor.
type ExecutorFunc func(ctx context.Context, c Call) (Result, error)

// Execute calls f.
func (f ExecutorFunc) Execute(ctx context.Context, c Call) (Result, error) { return f(ctx, c) }

// Executors returns the executor of every built-in block type. A test holds this set equal to
// the connector catalog's types.
func Executors(log *slog.Logger, http HTTPConfig) map[string]Executor {
	trigger := ExecutorFunc(func(_ context.Context, c Call) (Result, error) { return Result{Output: c.Input}, nil })
	return map[string]Executor{
		"trigger.manual":   trigger,
		"trigger.webhook":  trigger,
		"trigger.schedule": trigger,
		"transform": ExecutorFunc(func(_ context.Context, c Call) (Result, error) {
			return Result{Output: c.Params["value"]}, nil
		}),
		"log": ExecutorFunc(func(ctx context.Context, c Call) (Result, error) {
			msg := fmt.Sprint(c.Params["message"])
			logLine(ctx, func() {
				log.InfoContext(context.WithoutCancel(ctx), "workflow log", "run_id", c.RunID, "block_id", c.BlockID, "message", msg)
			})
			return Result{Output: map[string]any{"message": msg}}, nil
		}),
		"condition": ExecutorFunc(func(_ context.Context, c Call) (Result, error) {
			src, _ := c.Params["expression"].(string)
			v, err := c.Eval(src, c.Scope)
			if err != nil {
				return Result{}, err
			}
			b, ok := v.(bool)
			if !ok {
				return Result{}, fmt.Errorf("condition %q gave %T, not a boolean", src, v)
			}
			return Result{Output: map[string]any{"result": b}}, nil
		}),
		"fail": ExecutorFunc(func(_ context.Context, c Call) (Result, error) {
			msg := fmt.Sprint(c.Params["message"])
			n, set := IntParam(c.Params["fail_attempts"])
			if !set || c.Attempt <= n {
				return Result{}, errors.New(msg)
			}
			return Result{Output: map[string]any{"attempts": c.Attempt}}, nil
		}),
		"wait":         ExecutorFunc(waitExecutor),
		"http.request": newHTTPExecutor(http),
	}
}

// Inline reports whether the connector typ runs in process with no effect but its result
// (and the same result when run again), so the engine may run it inside the step's
// transaction: everything here but http.request. A log line is written again in the rare
// case such a transaction fails and its job runs the block again.
func Inline(typ string) bool {
	switch typ {
	case "trigger.manual", "trigger.webhook", "trigger.schedule", "transform", "log", "condition", "fail", "wait":
		return true
	}
	return false
}

func waitExecutor(_ context.Context, c Call) (Result, error) {
	now := time.Now()
	if d, ok := c.Params["duration"].(string); ok {
		dur, err := time.ParseDuration(d)
		if err != nil {
			return Result{}, fmt.Errorf("duration %q: %w", d, err)
		}
		return Result{Wait: &WaitSpec{Kind: "sleep", WakeAt: now.Add(dur)}}, nil
	}
	if u, ok := c.Params["until"].(string); ok {
		at, err := time.Parse(time.RFC3339Nano, u)
		if err != nil {
			return Result{}, fmt.Errorf("until %q is not an RFC 3339 timestamp", u)
		}
		return Result{Wait: &WaitSpec{Kind: "sleep", WakeAt: at}}, nil
	}
	if s, ok := c.Params["signal"].(string); ok && s != "" {
		spec := &WaitSpec{Kind: "signal", Signal: s}
		if t, ok := c.Params["timeout"].(string); ok {
			dur, err := time.ParseDuration(t)
			if err != nil {
				return Result{}, fmt.Errorf("timeout %q: %w", t, err)
			}
			spec.Timeout = dur
		}
		return Result{Wait: spec}, nil
	}
	return Result{}, errors.New("wait needs exactly one of duration, until or signal")
}

// IntParam reads an integer param that may be a json.Number, a float or an int.
func IntParam(v any) (int, bool) {
	switch x := v.(type) {
	case json.Number:
		n, err := strconv.Atoi(x.String())
		return n, err == nil
	case float64:
		return int(x), true
	case int:
		return x, true
	case int64:
		return int(x), true
	}
	return 0, false
}
