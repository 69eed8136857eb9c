package wire_test

import (
	"testing"

	"github.com/stretchr/testify/require"

	"svc.dev/libs/wire"
)

func TestNearest(t *testing.T) {
	t.Parallel()
	members := []string{"input", "idempotencyKey", "name", "note"}
	for name, want := range map[string]string{
		"idempotency_key": "idempotencyKey", // case and separators
		"IDEMPOTENCY-KEY": "idempotencyKey",
		"inptu":           "input", // a swap of neighbours is one edit
		"inpt":            "input",
		"nam":             "name", // one edit from name, two from note
		"xyz":             "",     // nothing near
		"in":              "",     // too short to guess
		"payload":         "",     // unrelated
		"nose":            "note", // one edit from note, two from name
	} {
		require.Equal(t, want, wire.Nearest(name, members), name)
	}
	require.Empty(t, wire.Nearest("nose", []string{"note", "node"}), "two names as near: no guess")
	require.Equal(t, 1, wire.Distance("name", "nmae")) //nolint:misspell // a swap of neighbours, on purpose
	require.Equal(t, 3, wire.Distance("kitten", "sitting"))
}
