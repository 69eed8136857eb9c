package catalog

import (
	"bytes"
	"encoding/json"
	"math/rand/v2"
	"testing"

	"github.com/stretchr/testify/require"

	"svc.dev/services/workflow-editor/internal/domain/workflow"
)

// The sizes the applier keeps under MaxDefinitionBytes are exactly what Definition.MarshalJSON
// writes: strings with every kind of escape, invalid UTF-8, numbers as written, nesting.
func TestSizesAreExact(t *testing.T) {
	t.Parallel()
	rnd := rand.New(rand.NewPCG(3, 3))
	pieces := []string{"a", "é", "\"", "\\", "\n", "\r", "\t", "\b", "\f", "\x00", "\x1f", "\x7f", "\xff", "\xe2\x80", "\u2028", "\u2029", "<>&", "{{ x }}", "😀", "\ufffd"}
	str := func() string {
		var b bytes.Buffer
		for range rnd.IntN(12) {
			b.WriteString(pieces[rnd.IntN(len(pieces))])
		}
		return b.String()
	}
	var value func(depth int) any
	value = func(depth int) any {
		switch k := rnd.IntN(9); {
		case k == 0:
			return nil
		case k == 1:
			return rnd.IntN(2) == 0
		case k == 2:
			return json.Number([]string{"0", "-1.5e-300", "12345678901234567890", "1E+2"}[rnd.IntN(4)])
		case k == 3:
			return rnd.Float64() * 1e6 // not from the decoder: measured by encoding
		case k <= 5 || depth > 3:
			return str()
		case k <= 7:
			m := map[string]any{}
			for range rnd.IntN(4) {
				m[str()] = value(depth + 1)
			}
			return m
		default:
			a := make([]any, rnd.IntN(4))
			for i := range a {
				a[i] = value(depth + 1)
			}
			return a
		}
	}
	for range 2000 {
		def := workflow.Definition{}
		for range rnd.IntN(4) {
			params, _ := value(0).(map[string]any)
			def.Blocks = append(def.Blocks, workflow.Block{ID: str(), Type: str(), Params: params})
		}
		for range rnd.IntN(3) {
			def.Edges = append(def.Edges, workflow.Edge{From: str(), To: str(), Branch: []string{"", "true", str()}[rnd.IntN(3)]})
		}
		raw, err := def.MarshalJSON()
		require.NoError(t, err)
		total := len(`{"blocks":[],"edges":[]}`)
		for _, blk := range def.Blocks {
			total += blockSize(blk)
		}
		for _, e := range def.Edges {
			total += edgeSize(e)
		}
		// Each block and edge is counted with a comma; the last of each list has none.
		if len(def.Blocks) > 0 {
			total--
		}
		if len(def.Edges) > 0 {
			total--
		}
		require.Equal(t, len(raw), total, "%s", raw)
	}
}
