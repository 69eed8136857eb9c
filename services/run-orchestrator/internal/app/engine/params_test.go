package engine_test

import (
	"encoding/json"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"svc.dev/proto/connectors"
	"svc.dev/services/run-orchestrator/internal/app/engine"
)

// Resolved params against the catalog's params schemas: what a template yields is held to the
// same rules as what the editor checked at save time.
func TestParamsValidator(t *testing.T) {
	t.Parallel()
	v, err := engine.NewParamsValidator(connectors.MustLoad())
	require.NoError(t, err)

	tests := []struct {
		name    string
		typ     string
		params  map[string]any
		pointer string // "" = valid
		rule    string
		allowed []any
	}{
		{"MethodOutOfEnum", "http.request", map[string]any{"method": "TRACE", "url": "https://example.com"}, "/method", "enum",
			[]any{"GET", "POST", "PUT", "PATCH", "DELETE", "HEAD", "OPTIONS"}},
		{"TimeoutOverTheMaximum", "http.request", map[string]any{"method": "GET", "url": "https://example.com", "timeout_ms": 604800000}, "/timeout_ms", "maximum", nil},
		{"TimeoutNotAnInteger", "http.request", map[string]any{"method": "GET", "url": "https://example.com", "timeout_ms": 1.5}, "/timeout_ms", "type", nil},
		{"URLNotHTTP", "http.request", map[string]any{"method": "GET", "url": "file:///etc/passwd"}, "/url", "pattern", nil},
		{"HeadersNotAnObject", "http.request", map[string]any{"method": "GET", "url": "https://e.com", "headers": []any{"x"}}, "/headers", "type", nil},
		{"UnknownParam", "log", map[string]any{"message": "m", "oops": 1}, "/oops", "additionalProperties", nil},
		{"DurationGoCannotRead", "wait", map[string]any{"duration": "9999999999h"}, "/duration", "format", nil},
		{"FailAttemptsOverTheMaximum", "fail", map[string]any{"message": "m", "fail_attempts": 1000}, "/fail_attempts", "maximum", nil},
		{"MissingRequired", "http.request", map[string]any{"method": "GET"}, "/url", "required", nil},

		{"Valid", "http.request", map[string]any{"method": "GET", "url": "https://example.com", "timeout_ms": json.Number("300000")}, "", "", nil},
		// The server adds allow_private_network; the check never refuses it.
		{"HiddenParamTheServerAdds", "http.request", map[string]any{"method": "GET", "url": "https://e.com", "allow_private_network": true}, "", "", nil},
		// Raw params: a condition's expression is a string; input_schema is the editor's to check.
		{"Expression", "condition", map[string]any{"expression": "input.n > 5"}, "", "", nil},
		{"InputSchema", "trigger.manual", map[string]any{"input_schema": map[string]any{"type": "object", "x-anything": []any{1}}}, "", "", nil},
		// Template results of Go types the validator does not read are checked in JSON form.
		{"GoTypesFromTemplates", "transform", map[string]any{"value": []int{1, 2, 3}}, "", "", nil},
		{"GoTypesFromTemplatesChecked", "http.request", map[string]any{"method": "GET", "url": "https://e.com", "timeout_ms": int64(1 << 40)}, "/timeout_ms", "maximum", nil},
		{"UnknownTypePasses", "nope", map[string]any{"x": 1}, "", "", nil},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			_, err := v.Check(tc.typ, tc.params)
			if tc.pointer == "" {
				require.NoError(t, err)
				return
			}
			var pe *engine.ParamError
			require.ErrorAs(t, err, &pe)
			require.Equal(t, tc.pointer, pe.Pointer)
			require.Equal(t, tc.rule, pe.Rule)
			require.Equal(t, tc.allowed, pe.Allowed)
			require.Contains(t, err.Error(), "param "+tc.pointer+" of "+tc.typ)
		})
	}

	t.Run("MessageNamesTheAllowedValues", func(t *testing.T) {
		t.Parallel()
		_, err := v.Check("http.request", map[string]any{"method": "TRACE", "url": "https://e.com"})
		require.EqualError(t, err, `param /method of http.request, as resolved, breaks the connector's schema (enum): `+
			`"TRACE" is not one of the allowed values; allowed: ["GET","POST","PUT","PATCH","DELETE","HEAD","OPTIONS"]`)
	})

	// A whole-param template keeps its type; where the schema says string, the connector gets
	// its JSON text, as connectors always took it. The resolved params are left as they are.
	t.Run("TextParamsTakeJSONText", func(t *testing.T) {
		t.Parallel()
		params := map[string]any{"message": 200}
		got, err := v.Check("log", params)
		require.NoError(t, err)
		require.Equal(t, map[string]any{"message": "200"}, got)
		require.Equal(t, map[string]any{"message": 200}, params, "not changed in place")

		got, err = v.Check("log", map[string]any{"message": map[string]any{"n": 1}})
		require.NoError(t, err)
		require.Equal(t, map[string]any{"message": `{"n":1}`}, got)
		got, err = v.Check("log", map[string]any{"message": nil})
		require.NoError(t, err)
		require.Equal(t, map[string]any{"message": "null"}, got)

		headers := map[string]any{"x-n": 7, "x-s": "s"}
		got, err = v.Check("http.request", map[string]any{"method": "GET", "url": "https://e.com", "headers": headers, "query": map[string]any{"b": true}})
		require.NoError(t, err)
		require.Equal(t, map[string]any{"x-n": "7", "x-s": "s"}, got["headers"])
		require.Equal(t, map[string]any{"b": "true"}, got["query"])
		require.Equal(t, 7, headers["x-n"])

		// Text that breaks the string's own rules still fails: a url must be http(s).
		_, err = v.Check("http.request", map[string]any{"method": "GET", "url": 5})
		var pe *engine.ParamError
		require.ErrorAs(t, err, &pe)
		require.Equal(t, "/url", pe.Pointer)
		require.Equal(t, "pattern", pe.Rule)
		// Not every param is text: a number where a number is due stays one.
		got, err = v.Check("http.request", map[string]any{"method": "GET", "url": "https://e.com", "timeout_ms": 5})
		require.NoError(t, err)
		require.Equal(t, 5, got["timeout_ms"])
	})

	t.Run("NotJSON", func(t *testing.T) {
		t.Parallel()
		var pe *engine.ParamError
		_, err := v.Check("transform", map[string]any{"value": func() {}})
		require.ErrorAs(t, err, &pe)
		require.Equal(t, "json", pe.Rule)
	})

	t.Run("TimeoutsNeverAboveTheCatalogsMaximum", func(t *testing.T) {
		t.Parallel()
		require.Equal(t, 300*time.Second, v.Bound("http.request", 7*24*time.Hour))
		require.Equal(t, 300*time.Second, v.Bound("http.request", -time.Second))
		require.Equal(t, 10*time.Second, v.Bound("http.request", 10*time.Second))
		// Without a timeout_ms param, the ceiling is the connector's timeout.
		require.Equal(t, 5*time.Second, v.Bound("transform", time.Hour))
	})
}

// http.request fits its whole output under the attempt's bound: a body at the bound is cut
// further (marked truncated) so that status, headers and its JSON form fit beside it, also
// BenchmarkParamsValidator is the check's cost per attempt in the common case: valid params.
func BenchmarkParamsValidator(b *testing.B) {
	v, err := engine.NewParamsValidator(connectors.MustLoad())
	require.NoError(b, err)
	for _, tc := range []struct {
		typ    string
		params map[string]any
	}{
		{"log", map[string]any{"message": "n is 42"}},
		{"http.request", map[string]any{"method": "POST", "url": "https://example.com/hook", "timeout_ms": 2000,
			"headers": map[string]any{"authorization": "Bearer x", "content-type": "application/json"}, "body": map[string]any{"n": 42}}},
	} {
		b.Run(tc.typ, func(b *testing.B) {
			b.ReportAllocs()
			for b.Loop() {
				if _, err := v.Check(tc.typ, tc.params); err != nil {
					b.Fatal(err)
				}
			}
		})
	}
}
