package workflowtest

import (
	"bufio"
	"bytes"
	"encoding/json"
	"os"
	"path/filepath"
	"runtime"
	"strconv"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"

	"svc.dev/services/workflow-editor/internal/domain/workflow"
)

// paramsAlphabet holds the params FuzzApply's operations draw from: ordinary ones, and values
// at and past what the applier accepts, which must be refused as invalid_param or stored
// without error (StoresWhatApplyAccepts).
func paramsAlphabet() []map[string]any {
	return []map[string]any{
		nil,
		{"message": "hi {{ steps.a.output }}"},
		{"method": "GET", "url": "https://x"},
		{"expression": "input.n > 1"},
		{"duration": "1s"},
		{"allow_private_network": true},
		{"url": nil},
		{"value": []any{"{{ input }}", json.Number("1")}},
		// Numbers Postgres's numeric cannot hold: refused.
		{"value": json.Number("1e-20000")},
		{"value": map[string]any{"n": json.Number("0." + strings.Repeat("0", 20000))}},
		{"value": []any{json.Number("1e999"), json.Number("0e-20000")}},
		// Numbers at the limits: accepted, and storable.
		{"value": map[string]any{"small": json.Number("1e-16383"), "half": json.Number("0.5e-16382"),
			"big": json.Number("1.5e308"), "zero": json.Number("0e-16383"), "long": json.Number("0." + strings.Repeat("1", 16383))}},
		// Expressions past the limits, a schema that does not compile, a duration that
		// overflows, a NUL: refused.
		{"expression": strings.Repeat("(", 65) + "1" + strings.Repeat(")", 65), "message": "{{ '" + strings.Repeat("x", 5000) + "' }}"},
		{"input_schema": map[string]any{"$ref": "#/nope"}},
		{"duration": "9999999999h", "timeout": "1h"},
		{"value": "a\x00b", "message": "nul \x00"},
	}
}

// OpsFromBytes turns fuzz input into a sequence of operations over a small alphabet of ids,
// types and params, so that the fuzzer reaches every branch of the applier quickly.
func OpsFromBytes(data []byte) []workflow.Op {
	ids := []string{"a", "b", "c", "d", "e", "", "bad id", "a-1"}
	types := []string{"trigger.manual", "http.request", "condition", "log", "wait", "transform", "nope", ""}
	opTypes := []string{"add", "update", "remove", "connect", "disconnect", "add", "connect", "zap"}
	params := paramsAlphabet()
	branches := []*string{nil, ptr("true"), ptr("false"), ptr("maybe")}
	var out []workflow.Op
	for len(data) >= 4 {
		b0, b1, b2, b3 := data[0], data[1], data[2], data[3]
		data = data[4:]
		op := workflow.Op{
			Type:          opTypes[b0%8],
			BlockID:       ids[b1%8],
			BlockType:     types[b2%8],
			TargetBlockID: ids[(b1>>3)%8],
			Branch:        branches[(b2>>3)%4],
		}
		if p := params[int(b3)%len(params)]; p != nil {
			op.Params, op.HasParams = p, true
		}
		out = append(out, op)
	}
	return out
}

func ptr(s string) *string { return &s }

// ApplySeeds is FuzzApply's seed corpus: a few graphs, and each params of the alphabet added
// to a block of each type, then set again by an update.
func ApplySeeds() [][]byte {
	seeds := [][]byte{
		{0, 0, 0, 0, 0, 1, 3, 1, 3, 8, 0, 0},
		{0, 0, 0, 0, 0, 9, 1, 2, 3, 8, 0, 0, 3, 1, 0, 0, 2, 0, 0, 0, 4, 8, 0, 0},
		{5, 0, 0, 0, 6, 1, 2, 3, 7, 7, 7, 7, 1, 0, 0, 5},
	}
	for p := range len(paramsAlphabet()) {
		for _, typ := range []byte{0, 1, 2, 3, 4, 5} {
			seeds = append(seeds, []byte{0, 0, typ, byte(p), 1, 0, typ, byte(p)})
		}
	}
	return seeds
}

// ApplyCorpus is ApplySeeds and every input the fuzzer saved for FuzzApply (the catalog
// package's testdata/fuzz/FuzzApply).
func ApplyCorpus(t testing.TB) [][]byte {
	t.Helper()
	corpus := ApplySeeds()
	_, file, _, ok := runtime.Caller(0)
	require.True(t, ok)
	dir := filepath.Join(filepath.Dir(file), "..", "..", "catalog", "testdata", "fuzz", "FuzzApply")
	entries, err := os.ReadDir(dir)
	if os.IsNotExist(err) {
		return corpus
	}
	require.NoError(t, err)
	for _, e := range entries {
		raw, err := os.ReadFile(filepath.Join(dir, e.Name()))
		require.NoError(t, err)
		corpus = append(corpus, decodeCorpusFile(t, e.Name(), raw))
	}
	return corpus
}

// decodeCorpusFile reads one `go test fuzz v1` file of a single []byte value.
func decodeCorpusFile(t testing.TB, name string, raw []byte) []byte {
	t.Helper()
	sc := bufio.NewScanner(bytes.NewReader(raw))
	sc.Buffer(nil, 1<<20)
	require.True(t, sc.Scan() && sc.Text() == "go test fuzz v1", "%s: not a fuzz corpus file", name)
	require.True(t, sc.Scan(), "%s: no value", name)
	lit, ok := strings.CutPrefix(sc.Text(), "[]byte(")
	require.True(t, ok, "%s: not a []byte value", name)
	s, err := strconv.Unquote(strings.TrimSuffix(lit, ")"))
	require.NoError(t, err, name)
	return []byte(s)
}
