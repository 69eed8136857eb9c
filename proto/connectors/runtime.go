package connectors

import (
	"context"
	"encoding/json"
	"log/slog"
	"strconv"
	"sync"
	"time"
)

// Runtime is a connector as the engine runs it, beside its catalog entry of the same Type.
// Each built-in connector declares one in its own folder under builtin/, next to its catalog
// entry; builtin.All lists them.
type Runtime struct {
	Type string
	// New builds the connector's executor from the server's configuration.
	New func(cfg Config) Executor
	// Inline says the connector runs in process with no effect but its result, and gives the
	// same result when run again: the engine may then run it inside the step's transaction,
	// the attempt begun and finished in one commit.
	Inline bool
	// AtDispatch says a run whose blocks are all of such connectors may be run to its end at
	// its dispatch (Inline, and never waits).
	AtDispatch bool
	// Hidden is the hidden params the server's configuration sets on every block of the type
	// (nil or an empty map: none).
	Hidden func(cfg Config) map[string]any
	// Raw names the params kept as written when a block's params are resolved, besides the
	// x-expression ones: the connector reads them as they are (a JSON Schema), or the dispatch
	// evaluates them (a trigger's concurrency key).
	Raw []string
}

// Config is the server's configuration a connector may read.
type Config struct {
	Log *slog.Logger
	// AllowPrivateNetwork lets http.request reach loopback, private and link-local targets.
	AllowPrivateNetwork bool
	// MaxOutput bounds an attempt's output JSON in bytes (0: 1 MiB).
	MaxOutput int
}

// Call is what an executor gets for one attempt.
type Call struct {
	RunID   string
	BlockID string
	Attempt int
	// Params are the block's params with templates resolved (raw params stay as written).
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

// Executor runs one attempt of one block type. An error whose chain holds an ErrorCode()
// method records that code on the failed attempt.
type Executor interface {
	Execute(ctx context.Context, c Call) (Result, error)
}

// ExecutorFunc adapts a function to Executor.
type ExecutorFunc func(ctx context.Context, c Call) (Result, error)

// Execute calls f.
func (f ExecutorFunc) Execute(ctx context.Context, c Call) (Result, error) { return f(ctx, c) }

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

// A block run before its transaction is known to commit (a run's blocks run at its dispatch,
// whose transaction may still fail or find the run's key taken) must leave no trace outside
// the run until then: its log lines wait in a DeferredLogs and are written once the
// transaction commits, or dropped.

// DeferredLogs holds the log lines of blocks run under a context from its Defer.
type DeferredLogs struct {
	mu    sync.Mutex
	lines []func()
}

type deferredKey struct{}

// Defer returns a context under which LogLine keeps its lines in d instead of writing them.
func (d *DeferredLogs) Defer(ctx context.Context) context.Context {
	return context.WithValue(ctx, deferredKey{}, d)
}

// Write writes the lines kept so far, in order, and forgets them.
func (d *DeferredLogs) Write() {
	d.mu.Lock()
	lines := d.lines
	d.lines = nil
	d.mu.Unlock()
	for _, write := range lines {
		write()
	}
}

// Drop forgets the lines kept so far.
func (d *DeferredLogs) Drop() {
	d.mu.Lock()
	d.lines = nil
	d.mu.Unlock()
}

// LogLine writes line at once, or keeps it when ctx defers logs.
func LogLine(ctx context.Context, line func()) {
	d, _ := ctx.Value(deferredKey{}).(*DeferredLogs)
	if d == nil {
		line()
		return
	}
	d.mu.Lock()
	d.lines = append(d.lines, line)
	d.mu.Unlock()
}
