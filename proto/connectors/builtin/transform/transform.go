// Package transform is the transform connector: its output is its value param, templates
// resolved.
package transform

import (
	"context"

	"svc.dev/proto/connectors"
)

// Runtime is transform as the engine runs it: inline.
func Runtime() connectors.Runtime {
	return connectors.Runtime{Type: "transform", Inline: true, AtDispatch: true,
		New: func(connectors.Config) connectors.Executor {
			return connectors.ExecutorFunc(func(_ context.Context, c connectors.Call) (connectors.Result, error) {
				return connectors.Result{Output: c.Params["value"]}, nil
			})
		}}
}
