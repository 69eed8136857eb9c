package openapi_test

import (
	"encoding/json"
	"testing"

	"github.com/stretchr/testify/require"
	"go.yaml.in/yaml/v3"

	"svc.dev/proto/openapi"
)

// The JSON form holds exactly what the YAML document holds: decoded both ways, the values
// are equal (numbers, booleans, nulls and quoted strings keep their types).
func TestJSONIsTheDocument(t *testing.T) {
	t.Parallel()
	raw, err := openapi.JSON()
	require.NoError(t, err)
	var fromJSON any
	require.NoError(t, json.Unmarshal(raw, &fromJSON))

	var fromYAML any
	require.NoError(t, yaml.Unmarshal(openapi.Document(), &fromYAML))
	// Round-trip the YAML through encoding/json so both sides use the same Go types
	// (float64 numbers, map[string]any objects).
	b, err := json.Marshal(fromYAML)
	require.NoError(t, err)
	var want any
	require.NoError(t, json.Unmarshal(b, &want))
	require.Equal(t, want, fromJSON)

	doc := fromJSON.(map[string]any)
	require.Equal(t, "3.1.0", doc["openapi"])
	paths := doc["paths"].(map[string]any)
	get := paths["/api/openapi.json"].(map[string]any)["get"].(map[string]any)
	require.Equal(t, "gateway", get["x-service"])
	require.Equal(t, []any{}, get["security"], "the document is open")
	// Status keys stay strings; a quoted "200" is not turned into a number anywhere.
	require.Contains(t, get["responses"].(map[string]any), "200")
}
