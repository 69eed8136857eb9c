package run_test

import (
	"encoding/json"
	"testing"

	"github.com/stretchr/testify/require"

	"svc.dev/services/run-orchestrator/internal/domain/run"
)

func TestStateAdvance(t *testing.T) {
	t.Parallel()

	def := run.Definition{
		Blocks: []run.Block{{ID: "t"}, {ID: "c"}, {ID: "yes"}, {ID: "no"}, {ID: "after_no"}, {ID: "join"}},
		Edges: []run.Edge{
			{From: "t", To: "c"},
			{From: "c", To: "yes", Branch: "true"},
			{From: "c", To: "no", Branch: "false"},
			{From: "no", To: "after_no"},
			{From: "yes", To: "join"},
			{From: "after_no", To: "join"},
		},
	}
	s, err := run.ParseState(nil)
	require.NoError(t, err)
	ready := func() []string {
		r, _ := s.Advance(def)
		return r
	}
	require.Equal(t, []string{"t"}, ready())

	s.Block("t").Status = run.BlockSucceeded
	require.Equal(t, []string{"c"}, ready())

	s.Block("c").Status = run.BlockSucceeded
	s.Block("c").Output = json.RawMessage(`{"result":true}`)
	require.Equal(t, []string{"yes"}, ready())
	require.Equal(t, run.BlockSkipped, s.Block("no").Status)
	require.Equal(t, run.BlockSkipped, s.Block("after_no").Status, "descendants of a skipped block are skipped")

	s.Block("yes").Status = run.BlockSucceeded
	require.Equal(t, []string{"join"}, ready(), "one taken edge is enough")

	s.Block("join").Status = run.BlockSucceeded
	s.Block("join").Output = json.RawMessage(`1`)
	require.Empty(t, ready())
	require.Equal(t, map[string]json.RawMessage{"join": json.RawMessage(`1`)}, s.Output(def))
}
