package jsonvalidate_test

import (
	"encoding/json"
	"fmt"
	"log/slog"
	"testing"

	"github.com/stretchr/testify/require"

	"svc.dev/proto/connectors"
	"svc.dev/proto/connectors/builtin/jsonvalidate"
)

var orderSchema = map[string]any{
	"type":     "object",
	"required": []any{"id", "qty"},
	"properties": map[string]any{
		"id":    map[string]any{"type": "string", "pattern": "^ord_"},
		"qty":   map[string]any{"type": "integer", "minimum": json.Number("1")},
		"email": map[string]any{"type": "string", "format": "email"},
		"lines": map[string]any{"type": "array", "items": map[string]any{"$ref": "#/$defs/line"}},
	},
	"$defs": map[string]any{"line": map[string]any{"type": "object", "required": []any{"sku"}}},
}

func run(t *testing.T, params map[string]any) (map[string]any, error) {
	t.Helper()
	ex := jsonvalidate.Runtime().New(connectors.Config{Log: slog.New(slog.DiscardHandler)})
	res, err := ex.Execute(t.Context(), connectors.Call{Params: params})
	if err != nil {
		return nil, err
	}
	// The engine stores the output as JSON: it must encode.
	raw, merr := json.Marshal(res.Output)
	require.NoError(t, merr)
	var out map[string]any
	require.NoError(t, json.Unmarshal(raw, &out))
	return out, nil
}

func TestValidValue(t *testing.T) {
	t.Parallel()
	out, err := run(t, map[string]any{"schema": orderSchema, "value": map[string]any{
		"id": "ord_1", "qty": json.Number("2"), "email": "a@example.com", "lines": []any{map[string]any{"sku": "x"}}}})
	require.NoError(t, err)
	require.Equal(t, map[string]any{"valid": true, "errors": []any{}}, out)
}

// Each violation says where in the value (a JSON pointer) and why, in document order; a $ref
// inside the schema is followed.
func TestInvalidValueListsEveryViolation(t *testing.T) {
	t.Parallel()
	out, err := run(t, map[string]any{"schema": orderSchema, "value": map[string]any{
		"id": "x1", "qty": 0.5, "email": "nope", "lines": []any{map[string]any{}}}})
	require.NoError(t, err)
	require.Equal(t, false, out["valid"])
	var paths []string
	for _, e := range out["errors"].([]any) {
		v := e.(map[string]any)
		require.NotEmpty(t, v["message"])
		paths = append(paths, v["path"].(string))
	}
	require.Equal(t, []string{"/email", "/id", "/lines/0", "/qty"}, paths)
	require.NotContains(t, out, "more_errors")
}

// With fail_on_invalid the attempt fails with code json_invalid and the first violation in
// its message.
func TestFailOnInvalid(t *testing.T) {
	t.Parallel()
	_, err := run(t, map[string]any{"schema": orderSchema, "value": map[string]any{"id": "ord_1"}, "fail_on_invalid": true})
	var inv *jsonvalidate.InvalidError
	require.ErrorAs(t, err, &inv)
	require.Equal(t, "json_invalid", inv.ErrorCode())
	require.ErrorContains(t, err, `the value does not match the schema: at "/": missing property 'qty'`)

	out, err := run(t, map[string]any{"schema": orderSchema, "value": map[string]any{"id": "ord_1", "qty": 3}, "fail_on_invalid": true})
	require.NoError(t, err)
	require.Equal(t, true, out["valid"])
}

// A violation list is bounded; the rest are counted.
func TestManyViolationsAreCounted(t *testing.T) {
	t.Parallel()
	items := make([]any, 50)
	for i := range items {
		items[i] = fmt.Sprint(i)
	}
	out, err := run(t, map[string]any{"schema": map[string]any{"type": "array", "items": map[string]any{"type": "integer"}}, "value": items})
	require.NoError(t, err)
	require.Len(t, out["errors"], 20)
	require.EqualValues(t, 30, out["more_errors"])
}

// A schema that refers outside itself is refused: the server loads no file and no URL.
func TestOutsideReferencesAreRefused(t *testing.T) {
	t.Parallel()
	for _, ref := range []string{"file:///etc/passwd", "https://example.com/schema.json", "other.json"} {
		_, err := run(t, map[string]any{"schema": map[string]any{"$ref": ref}, "value": 1})
		require.ErrorContains(t, err, "only references inside it are allowed", ref)
	}
	_, err := run(t, map[string]any{"schema": map[string]any{"type": "nope"}, "value": 1})
	require.ErrorContains(t, err, "schema: ")
}

// Large integers are compared exactly, not as floats.
func TestNumbersAreExact(t *testing.T) {
	t.Parallel()
	out, err := run(t, map[string]any{"schema": map[string]any{"maximum": json.Number("9007199254740992")}, "value": json.Number("9007199254740993")})
	require.NoError(t, err)
	require.Equal(t, false, out["valid"])
}
