// Package trigger is the three triggers (manual, webhook, schedule): a run's first block,
// whose output is the run input.
package trigger

import (
	"context"

	"svc.dev/proto/connectors"
)

// Runtimes are the triggers as the engine runs them: inline, their concurrency key kept raw
// (the dispatch evaluates it), and trigger.manual's input_schema kept as written.
func Runtimes() []connectors.Runtime {
	out := make([]connectors.Runtime, 0, 3)
	for _, typ := range []string{"trigger.manual", "trigger.webhook", "trigger.schedule"} {
		raw := []string{"concurrency"}
		if typ == "trigger.manual" {
			raw = append(raw, "input_schema")
		}
		out = append(out, connectors.Runtime{Type: typ, New: newExecutor, Inline: true, AtDispatch: true, Raw: raw})
	}
	return out
}

func newExecutor(connectors.Config) connectors.Executor {
	return connectors.ExecutorFunc(func(_ context.Context, c connectors.Call) (connectors.Result, error) {
		return connectors.Result{Output: c.Input}, nil
	})
}
