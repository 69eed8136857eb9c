package connectors_test

import (
	"bytes"
	"encoding/json"
	"strings"
	"testing"

	"github.com/santhosh-tekuri/jsonschema/v6"
	"github.com/stretchr/testify/require"

	"svc.dev/proto/connectors"
)

// The built-in connectors the API documents, which the catalog must hold at least.
func builtins() []string {
	return []string{
		"trigger.manual", "trigger.webhook", "trigger.schedule", "http.request",
		"transform", "condition", "wait", "log", "fail",
	}
}

func compile(t *testing.T, name string, schema json.RawMessage) *jsonschema.Schema {
	t.Helper()
	doc, err := jsonschema.UnmarshalJSON(bytes.NewReader(schema))
	require.NoError(t, err, name)
	c := jsonschema.NewCompiler()
	c.DefaultDraft(jsonschema.Draft2020)
	c.AssertFormat()
	require.NoError(t, c.AddResource(name, doc))
	s, err := c.Compile(name)
	require.NoError(t, err, name)
	return s
}

// Every entry is complete and every schema in it compiles; hidden marks sit only on top-level
// params that exist, and the public form has none of them.
func TestCatalogIsConsistent(t *testing.T) {
	t.Parallel()
	entries, err := connectors.Load()
	require.NoError(t, err)

	types := map[string]connectors.Entry{}
	for _, e := range entries {
		types[e.Type] = e
	}
	for _, want := range builtins() {
		require.Contains(t, types, want, "built-in connector missing from the catalog")
	}
	require.Equal(t, connectors.CategoryTrigger, entries[0].Category, "triggers come first")

	for _, e := range entries {
		t.Run(e.Type, func(t *testing.T) {
			t.Parallel()
			require.True(t, e.Category.Valid(), "category %q", e.Category)
			require.Equal(t, e.Category == connectors.CategoryTrigger, strings.HasPrefix(e.Type, "trigger."),
				"triggers and only triggers are named trigger.*")
			require.NotEmpty(t, e.Title)
			require.NotEmpty(t, e.Description)
			require.Positive(t, e.TimeoutMS)
			rp := e.RetryPolicy
			require.GreaterOrEqual(t, rp.MaxAttempts, 1)
			require.Positive(t, rp.InitialIntervalMS)
			require.GreaterOrEqual(t, rp.BackoffCoefficient, 1.0)
			require.GreaterOrEqual(t, rp.MaxIntervalMS, rp.InitialIntervalMS)

			compile(t, e.Type+"/params", e.Params)
			compile(t, e.Type+"/output_schema", e.OutputSchema)
			compile(t, e.Type+"/public", e.Public().Params)

			var schema struct {
				Type                 string                     `json:"type"`
				AdditionalProperties *bool                      `json:"additionalProperties"`
				Properties           map[string]json.RawMessage `json:"properties"`
				Required             []string                   `json:"required"`
			}
			require.NoError(t, json.Unmarshal(e.Params, &schema))
			require.Equal(t, "object", schema.Type, "params is an object")
			require.NotNil(t, schema.AdditionalProperties, "params says whether unknown params are allowed")
			require.False(t, *schema.AdditionalProperties, "unknown params are refused (unknown_param)")
			for _, r := range schema.Required {
				require.Contains(t, schema.Properties, r, "a required param is declared")
			}

			for _, h := range e.HiddenParams() {
				require.Contains(t, schema.Properties, h, "a hidden param exists in the schema")
				require.NotContains(t, schema.Required, h, "a hidden param is never required of a client")
			}
			// Hidden marks are top-level only: a nested one would never be enforced.
			nested := 0
			for _, raw := range schema.Properties {
				nested += strings.Count(string(raw), `"hidden"`)
			}
			require.Equal(t, len(e.HiddenParams()), nested, "hidden marks only on top-level params")

			public := e.Public()
			require.NotContains(t, string(public.Params), `"hidden"`)
			for _, h := range e.HiddenParams() {
				require.NotContains(t, string(public.Params), `"`+h+`"`)
			}
		})
	}

	require.Equal(t, []string{"allow_private_network"}, types["http.request"].HiddenParams())
	require.Empty(t, types["log"].HiddenParams())
}

// The editor reads the "x-expression" and "x-json-schema" marks on top-level params only, so a
// nested one would never be enforced; and the only format beyond JSON Schema's is go-duration.
func TestMarksAndFormats(t *testing.T) {
	t.Parallel()
	standard := map[string]bool{"date-time": true, "date": true, "time": true, "duration": true, "email": true,
		"hostname": true, "ipv4": true, "ipv6": true, "uri": true, "uri-reference": true, "uuid": true, "regex": true}
	for _, e := range connectors.MustLoad() {
		var schema struct {
			Properties map[string]map[string]json.RawMessage `json:"properties"`
		}
		require.NoError(t, json.Unmarshal(e.Params, &schema), e.Type)
		for name, prop := range schema.Properties {
			for key, raw := range prop {
				if key == "x-expression" || key == "x-json-schema" {
					require.Equal(t, "true", string(raw), "%s.%s: %s is true or absent", e.Type, name, key)
				}
				if key == "format" {
					var f string
					require.NoError(t, json.Unmarshal(raw, &f))
					require.True(t, standard[f] || f == "go-duration", "%s.%s: unknown format %q", e.Type, name, f)
				}
			}
			delete(prop, "x-expression")
			delete(prop, "x-json-schema")
			for _, raw := range prop {
				require.NotContains(t, string(raw), `"x-expression"`, "%s.%s: marks are top-level only", e.Type, name)
				require.NotContains(t, string(raw), `"x-json-schema"`, "%s.%s: marks are top-level only", e.Type, name)
			}
		}
	}
}

// Marshalled as JSON, an entry has exactly the members of the contract's catalog entry.
func TestEntryShape(t *testing.T) {
	t.Parallel()
	e := connectors.MustLoad()[0]
	raw, err := json.Marshal(e.Public())
	require.NoError(t, err)
	var members map[string]json.RawMessage
	require.NoError(t, json.Unmarshal(raw, &members))
	keys := make([]string, 0, len(members))
	for k := range members {
		keys = append(keys, k)
	}
	require.ElementsMatch(t, []string{"type", "category", "title", "description", "params", "output_schema", "retry_policy", "timeout_ms"}, keys)
	var rp map[string]any
	require.NoError(t, json.Unmarshal(members["retry_policy"], &rp))
	require.Len(t, rp, 4)
	require.Contains(t, rp, "max_attempts")
	require.Contains(t, rp, "initial_interval_ms")
	require.Contains(t, rp, "backoff_coefficient")
	require.Contains(t, rp, "max_interval_ms")
}

// fail's retry policy is the contract's: 3 attempts, 100 ms initial, ×2, 1 s max.
func TestFailRetryPolicy(t *testing.T) {
	t.Parallel()
	for _, e := range connectors.MustLoad() {
		if e.Type == "fail" {
			require.Equal(t, connectors.RetryPolicy{MaxAttempts: 3, InitialIntervalMS: 100, BackoffCoefficient: 2, MaxIntervalMS: 1000}, e.RetryPolicy)
			return
		}
	}
	t.Fatal("fail is not in the catalog")
}

// Aliases are catalog data the editor suggests from: an alias of a type is no type and no
// other type's alias, and an alias of a param is no param of that connector and no alias of
// another of its params, compared the way the editor compares names (case and punctuation
// aside).
func TestAliasesAreUnambiguous(t *testing.T) {
	t.Parallel()
	entries, err := connectors.Load()
	require.NoError(t, err)
	norm := func(s string) string {
		var b strings.Builder
		for _, r := range strings.ToLower(s) {
			if r >= 'a' && r <= 'z' || r >= '0' && r <= '9' {
				b.WriteRune(r)
			}
		}
		return b.String()
	}
	owner := map[string]string{}
	for _, e := range entries {
		owner[norm(e.Type)] = e.Type
	}
	for _, e := range entries {
		for _, a := range e.Aliases {
			prev, taken := owner[norm(a)]
			require.False(t, taken, "type alias %q of %s is already %s", a, e.Type, prev)
			owner[norm(a)] = e.Type
		}
		var schema struct {
			Properties map[string]struct {
				Aliases []string `json:"x-aliases"`
			} `json:"properties"`
		}
		require.NoError(t, json.Unmarshal(e.Params, &schema))
		params := map[string]string{}
		for name := range schema.Properties {
			params[norm(name)] = name
		}
		for name, p := range schema.Properties {
			for _, a := range p.Aliases {
				prev, taken := params[norm(a)]
				require.False(t, taken, "%s: alias %q of param %s is already %s", e.Type, a, name, prev)
				params[norm(a)] = name
			}
		}
	}
	require.NotEmpty(t, entries[0].Aliases, "the catalog has aliases")
}
