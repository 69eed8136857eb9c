// Package fail is the fail connector: its attempts fail with its message (the first
// fail_attempts of them, when that is set), to test retries and failure paths.
package fail

import (
	"context"
	"errors"
	"fmt"

	"svc.dev/proto/connectors"
)

// Runtime is fail as the engine runs it: inline, but never at a run's dispatch (it fails on
// purpose, so the run would go to a job anyway).
func Runtime() connectors.Runtime {
	return connectors.Runtime{Type: "fail", Inline: true,
		New: func(connectors.Config) connectors.Executor {
			return connectors.ExecutorFunc(func(_ context.Context, c connectors.Call) (connectors.Result, error) {
				msg := fmt.Sprint(c.Params["message"])
				n, set := connectors.IntParam(c.Params["fail_attempts"])
				if !set || c.Attempt <= n {
					return connectors.Result{}, errors.New(msg)
				}
				return connectors.Result{Output: map[string]any{"attempts": c.Attempt}}, nil
			})
		}}
}
