package run_test

import (
	"encoding/json"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"

	"svc.dev/services/run-orchestrator/internal/domain/run"
)

func concurrencyOf(t testing.TB, conc string) (*run.Concurrency, error) {
	t.Helper()
	d, err := run.ParseDefinition([]byte(`{"blocks":[{"block_id":"start","type":"trigger.webhook","params":{"concurrency":` + conc + `}}],"edges":[]}`))
	require.NoError(t, err)
	return run.ParseConcurrency(d)
}

func TestConcurrencyGroup(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		name, conc, input, key, err string
		limit                       int
	}{
		{"NoKey", `{"limit":3}`, `{"customer":"acme"}`, "", "", 3},
		{"Field", `{"limit":2,"key":"{{ input.customer }}"}`, `{"customer":"acme"}`, "acme", "", 2},
		{"Number", `{"limit":2,"key":"{{ input.n }}"}`, `{"n":42}`, "42", "", 2},
		{"Fraction", `{"limit":2,"key":"{{ input.n }}"}`, `{"n":1.5}`, "1.5", "", 2},
		{"Mixed", `{"limit":1,"key":"{{ input.region }}/{{ upper(input.tier) }}"}`, `{"region":"eu","tier":"gold"}`, "eu/GOLD", "", 1},
		{"Literal", `{"limit":1,"key":"all"}`, `null`, "all", "", 1},
		{"Missing", `{"limit":1,"key":"{{ input.customer }}"}`, `{}`, "", "gave null", 0},
		{"NullInput", `{"limit":1,"key":"{{ input.customer }}"}`, `null`, "", "", 0},
		{"Object", `{"limit":1,"key":"{{ input.c }}"}`, `{"c":{"a":1}}`, "", "an object", 0},
		{"Bool", `{"limit":1,"key":"{{ input.c }}"}`, `{"c":true}`, "", "a boolean", 0},
		{"MissingInText", `{"limit":1,"key":"c-{{ input.c }}"}`, `{}`, "", "gave null", 0},
		{"TooLong", `{"limit":1,"key":"{{ input.c }}"}`, `{"c":"` + strings.Repeat("x", 201) + `"}`, "", "more than 200 bytes", 0},
		{"MemoryBound", `{"limit":1,"key":"{{ string(len(map(1..100000000, # * 2))) }}"}`, `{}`, "", "budget exceeded", 0},
		{"StepsNotInScope", `{"limit":1,"key":"{{ steps.a.output.c }}"}`, `{}`, "", "failed over this input", 0},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			c, err := concurrencyOf(t, tc.conc)
			require.NoError(t, err)
			var in any
			require.NoError(t, json.Unmarshal([]byte(tc.input), &in))
			g, err := c.GroupOf(in)
			if tc.err != "" || tc.limit == 0 {
				var ke *run.KeyError
				require.ErrorAs(t, err, &ke)
				require.Contains(t, err.Error(), tc.err)
				return
			}
			require.NoError(t, err)
			require.Equal(t, run.Group{Key: tc.key, Limit: tc.limit}, g)
		})
	}
}

func TestParseConcurrency(t *testing.T) {
	t.Parallel()
	d, err := run.ParseDefinition([]byte(`{"blocks":[{"block_id":"start","type":"trigger.manual","params":{}}],"edges":[]}`))
	require.NoError(t, err)
	c, err := run.ParseConcurrency(d)
	require.NoError(t, err)
	require.Nil(t, c, "no declaration, no limit")
	for _, bad := range []string{`5`, `{}`, `{"limit":0}`, `{"limit":1001}`, `{"limit":1.5}`, `{"limit":"2"}`, `{"limit":1,"key":7}`,
		`{"limit":1,"key":"{{ input.a "}`, `{"limit":1,"key":"{{ ) }}"}`} {
		_, err := concurrencyOf(t, bad)
		require.Error(t, err, bad)
	}
}

// FuzzConcurrencyKey: any key template over any input either gives a key within the bound or
// an error, never a panic.
func FuzzConcurrencyKey(f *testing.F) {
	f.Add("{{ input.customer }}", `{"customer":"acme"}`)
	f.Add("c-{{ input.n * 2 }}-{{ input.s }}", `{"n":3,"s":"x"}`)
	f.Add("{{ repeat(input.s, 1000) }}", `{"s":"abc"}`)
	f.Fuzz(func(t *testing.T, key, input string) {
		raw, err := json.Marshal(map[string]any{"limit": 1, "key": key})
		require.NoError(t, err)
		c, err := concurrencyOf(t, string(raw))
		if err != nil {
			return
		}
		var in any
		if json.Unmarshal([]byte(input), &in) != nil {
			return
		}
		g, err := c.GroupOf(in)
		if err == nil {
			require.LessOrEqual(t, len(g.Key), run.MaxConcurrencyKeyBytes)
		}
	})
}
