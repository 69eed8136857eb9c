package run_test

import (
	"encoding/json"
	"maps"
	"slices"
	"testing"

	"github.com/stretchr/testify/require"

	"svc.dev/proto/connectors"
	"svc.dev/proto/connectors/builtin"
	"svc.dev/services/run-orchestrator/internal/domain/run"
)

// TestConnectors: the interpreter's connectors come from the catalog and the runtimes: the
// entry's retry policy, its x-expression params and its runtime's Raw kept raw, and the hidden
// params the server's configuration sets, only when it sets them.
func TestConnectors(t *testing.T) {
	t.Parallel()
	entries := connectors.MustLoad()
	runtimes := map[string]connectors.Runtime{}
	for _, rt := range builtin.All() {
		runtimes[rt.Type] = rt
	}
	for _, cfg := range []connectors.Config{{}, {AllowPrivateNetwork: true}} {
		mine := run.Connectors(entries, builtin.All(), cfg)
		require.Len(t, mine, len(entries))
		for _, e := range entries {
			c, ok := mine[e.Type]
			require.True(t, ok, "type %s", e.Type)
			require.Equal(t, run.RetryPolicy(e.RetryPolicy), c.Retry, "retry policy of %s", e.Type)
			var schema struct {
				Properties map[string]struct {
					Expr bool `json:"x-expression"`
				} `json:"properties"`
			}
			require.NoError(t, json.Unmarshal(e.Params, &schema))
			for name, p := range schema.Properties {
				want := p.Expr || slices.Contains(runtimes[e.Type].Raw, name)
				require.Equal(t, want, c.Raw[name], "%s.%s raw", e.Type, name)
			}
			if cfg.AllowPrivateNetwork {
				require.ElementsMatch(t, e.HiddenParams(), slices.Collect(maps.Keys(c.Extra)), "hidden params of %s", e.Type)
			} else {
				require.Empty(t, c.Extra, "hidden params of %s", e.Type)
			}
		}
	}
	require.True(t, run.Connectors(entries, builtin.All(), connectors.Config{})["trigger.manual"].Raw["input_schema"])
	require.True(t, run.Connectors(entries, builtin.All(), connectors.Config{})["trigger.webhook"].Raw[run.ConcurrencyParam])
}
