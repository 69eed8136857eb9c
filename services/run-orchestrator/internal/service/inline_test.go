package service_test

import (
	"fmt"
	"net/http"
	"net/http/httptest"
	"testing"

	"github.com/stretchr/testify/require"

	"svc.dev/services/run-orchestrator/internal/app/engine"
)

// TestInlineBlocksShareCommits: blocks whose connector runs in process with no effect but its
// result are begun and finished inside the step's transaction, several to a commit (at most
// engine.MaxInline), and every attempt is still recorded once, in order; a block that
// reaches outside (http.request) has its attempt committed as running before its call.
func TestInlineBlocksShareCommits(t *testing.T) {
	t.Parallel()
	sys := startWith(t, allowPrivate)
	pool := db(t, sys.dbURL)
	b := sys.setup(t)

	const n = 40
	blocks := []string{manual}
	edges := []string{}
	prev := "start"
	for i := range n {
		id := fmt.Sprintf("l%02d", i)
		blocks = append(blocks, fmt.Sprintf(`{"block_id":%q,"type":"log","params":{"message":"step %d of {{ input.n }}"}}`, id, i))
		edges = append(edges, edge(prev, id))
		prev = id
	}
	b.workflow(t, "wf_inline", 1, def(blocks, edges...))
	id := b.startRun(t, "wf_inline", map[string]any{"input": map[string]any{"n": 7}})
	b.waitStatus(t, id, "completed")

	logs := b.logs(t, id)
	require.Len(t, logs, n+1, "every attempt recorded")
	for i, a := range logs {
		require.Equal(t, "succeeded", a["status"], "attempt %d", i)
	}
	require.Equal(t, "l39", logs[n]["block_id"])
	// Rows written by one transaction carry its id (xmin): the 41 attempts took a handful of
	// commits, not one or two each.
	var commits int
	require.NoError(t, pool.QueryRow(t.Context(), `SELECT count(DISTINCT xmin::text) FROM orchestrator.step_attempts WHERE run_id = $1`, id).Scan(&commits))
	require.LessOrEqual(t, commits, (n+1)/engine.MaxInline+2)
	require.Greater(t, commits, 1, "a long chain commits every few blocks")

	// http.request: its attempt is durable (running) before the call reaches the server.
	seen := make(chan string, 1)
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		var status string
		err := pool.QueryRow(r.Context(), `SELECT status FROM orchestrator.step_attempts WHERE run_id = $1 AND block_id = 'call'`,
			r.URL.Query().Get("run")).Scan(&status)
		if err != nil {
			status = err.Error()
		}
		seen <- status
		w.WriteHeader(http.StatusOK)
	}))
	t.Cleanup(srv.Close)
	b.workflow(t, "wf_call", 1, def([]string{manual,
		`{"block_id":"call","type":"http.request","params":{"method":"GET","url":"` + srv.URL + `/?run={{ run.id }}"}}`,
		`{"block_id":"after","type":"log","params":{"message":"done"}}`,
	}, edge("start", "call"), edge("call", "after")))
	callRun := b.startRun(t, "wf_call", nil)
	b.waitStatus(t, callRun, "completed")
	require.Equal(t, "running", <-seen, "the http.request attempt was committed before its call")
}
