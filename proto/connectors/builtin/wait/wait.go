// Package wait is the wait connector: it suspends the run for a duration, until a time, or
// until a signal arrives (with an optional timeout).
package wait

import (
	"context"
	"errors"
	"fmt"
	"time"

	"svc.dev/proto/connectors"
)

// Runtime is wait as the engine runs it: inline (the wait itself is the engine's), never at a
// run's dispatch (it suspends the run).
func Runtime() connectors.Runtime {
	return connectors.Runtime{Type: "wait", Inline: true,
		New: func(connectors.Config) connectors.Executor { return connectors.ExecutorFunc(execute) }}
}

func execute(_ context.Context, c connectors.Call) (connectors.Result, error) {
	now := time.Now()
	if d, ok := c.Params["duration"].(string); ok {
		dur, err := time.ParseDuration(d)
		if err != nil {
			return connectors.Result{}, fmt.Errorf("duration %q: %w", d, err)
		}
		return connectors.Result{Wait: &connectors.WaitSpec{Kind: "sleep", WakeAt: now.Add(dur)}}, nil
	}
	if u, ok := c.Params["until"].(string); ok {
		at, err := time.Parse(time.RFC3339Nano, u)
		if err != nil {
			return connectors.Result{}, fmt.Errorf("until %q is not an RFC 3339 timestamp", u)
		}
		return connectors.Result{Wait: &connectors.WaitSpec{Kind: "sleep", WakeAt: at}}, nil
	}
	if s, ok := c.Params["signal"].(string); ok && s != "" {
		spec := &connectors.WaitSpec{Kind: "signal", Signal: s}
		if t, ok := c.Params["timeout"].(string); ok {
			dur, err := time.ParseDuration(t)
			if err != nil {
				return connectors.Result{}, fmt.Errorf("timeout %q: %w", t, err)
			}
			spec.Timeout = dur
		}
		return connectors.Result{Wait: spec}, nil
	}
	return connectors.Result{}, errors.New("wait needs exactly one of duration, until or signal")
}
