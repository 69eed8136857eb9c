// Package condition is the condition connector: an expr-lang expression over the run's scope
// that gives a boolean; the run takes the edges of its branch.
package condition

import (
	"context"
	"fmt"

	"svc.dev/proto/connectors"
)

// Runtime is condition as the engine runs it: inline (its expression is an x-expression
// param, kept raw and evaluated here).
func Runtime() connectors.Runtime {
	return connectors.Runtime{Type: "condition", Inline: true, AtDispatch: true,
		New: func(connectors.Config) connectors.Executor {
			return connectors.ExecutorFunc(func(_ context.Context, c connectors.Call) (connectors.Result, error) {
				src, _ := c.Params["expression"].(string)
				v, err := c.Eval(src, c.Scope)
				if err != nil {
					return connectors.Result{}, err
				}
				b, ok := v.(bool)
				if !ok {
					return connectors.Result{}, fmt.Errorf("condition %q gave %T, not a boolean", src, v)
				}
				return connectors.Result{Output: map[string]any{"result": b}}, nil
			})
		}}
}
