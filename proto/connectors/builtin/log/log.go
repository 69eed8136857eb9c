// Package log is the log connector: it writes its message to the service's log (the run's
// step log shows it as the attempt's output).
package log

import (
	"context"
	"fmt"

	"svc.dev/proto/connectors"
)

// Runtime is log as the engine runs it: inline. A log line is written again in the rare case
// the step's transaction fails and its job runs the block again.
func Runtime() connectors.Runtime {
	return connectors.Runtime{Type: "log", Inline: true, AtDispatch: true,
		New: func(cfg connectors.Config) connectors.Executor {
			return connectors.ExecutorFunc(func(ctx context.Context, c connectors.Call) (connectors.Result, error) {
				msg := fmt.Sprint(c.Params["message"])
				connectors.LogLine(ctx, func() {
					cfg.Log.InfoContext(context.WithoutCancel(ctx), "workflow log", "run_id", c.RunID, "block_id", c.BlockID, "message", msg)
				})
				return connectors.Result{Output: map[string]any{"message": msg}}, nil
			})
		}}
}
