package run

import (
	"encoding/json"

	"svc.dev/proto/connectors"
)

// Connectors is the interpreter's view of the connectors: for each catalog entry, its retry
// policy, the params kept raw (its x-expression params and its runtime's Raw) and the hidden
// params the server's configuration sets (its runtime's Hidden).
func Connectors(catalog []connectors.Entry, runtimes []connectors.Runtime, cfg connectors.Config) map[string]Connector {
	byType := make(map[string]connectors.Runtime, len(runtimes))
	for _, rt := range runtimes {
		byType[rt.Type] = rt
	}
	out := make(map[string]Connector, len(catalog))
	for _, entry := range catalog {
		p := entry.RetryPolicy
		c := Connector{
			Retry: RetryPolicy{MaxAttempts: p.MaxAttempts, InitialIntervalMS: p.InitialIntervalMS,
				BackoffCoefficient: p.BackoffCoefficient, MaxIntervalMS: p.MaxIntervalMS},
			Raw: expressionParams(entry),
		}
		rt := byType[entry.Type]
		for _, k := range rt.Raw {
			c.Raw[k] = true
		}
		if rt.Hidden != nil {
			if extra := rt.Hidden(cfg); len(extra) > 0 {
				c.Extra = extra
			}
		}
		out[entry.Type] = c
	}
	return out
}

// expressionParams are the entry's x-expression params.
func expressionParams(e connectors.Entry) map[string]bool {
	var s struct {
		Properties map[string]struct {
			Expr bool `json:"x-expression"`
		} `json:"properties"`
	}
	out := map[string]bool{}
	if json.Unmarshal(e.Params, &s) == nil {
		for k, p := range s.Properties {
			if p.Expr {
				out[k] = true
			}
		}
	}
	return out
}
