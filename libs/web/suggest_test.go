package web

import (
	"encoding/json"
	"testing"

	"github.com/stretchr/testify/require"
)

func TestSuggestMember(t *testing.T) {
	t.Parallel()
	type body struct {
		Input          json.RawMessage `json:"input" aka:"inputs,params,args"`
		IdempotencyKey *string         `json:"idempotencyKey"`
		Name           string          `json:"name" aka:"signal,event"`
		hidden         string
	}
	_ = body{}.hidden
	for unknown, want := range map[string]string{
		"params":          "input", // an alias
		"Signal":          "name",
		"idempotency_key": "idempotencyKey",
		"nmae":            "name", //nolint:misspell // the misspelt member is the input under test
		"hidden":          "",     // unexported fields are not members
		"xyz":             "",
	} {
		require.Equal(t, want, suggestMember(&body{}, unknown), unknown)
	}
	require.Empty(t, suggestMember(map[string]any{}, "x"), "only structs have members to suggest")
}
