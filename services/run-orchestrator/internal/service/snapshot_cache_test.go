package service_test

import (
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"svc.dev/libs/redisx"
	"svc.dev/libs/testkit"
	"svc.dev/services/run-orchestrator/internal/adapters/redis"
	"svc.dev/services/run-orchestrator/internal/service"
)

// TestSnapshotCacheWired: with SVC_ORCHESTRATOR_SNAPSHOT_CACHE_TTL set, concurrent starts of
// one workflow share one prepared snapshot (one editor read; the runs, ended at their dispatch
// through the interpreter, all complete: run with -race, this is where a shared definition
// would be caught being written), and a change the editor announces by moving the
// organization's epoch in Redis is pinned by the next start.
func TestSnapshotCacheWired(t *testing.T) {
	t.Parallel()
	rdb, keys := testkit.NewRedis(t)
	sys := startWith(t, func(c *service.Config) {
		c.SnapshotCacheTTL = time.Minute
		c.Base.RedisURL, c.Base.RedisPrefix = testkit.RedisURL(t), keys.Prefix()
	})
	b := sys.setup(t)
	epochs := redisx.NewEpochs(rdb)
	write := func(version int64, message string) {
		b.workflow(t, "wf_cached", version, def([]string{manual,
			`{"block_id":"shape","type":"transform","params":{"value":{"n":"{{ input.n }}","msg":"` + message + `"}}}`,
			`{"block_id":"check","type":"condition","params":{"expression":"input.n > 2"}}`,
			`{"block_id":"big","type":"log","params":{"message":"big {{ steps.shape.output.msg }}"}}`,
		}, edge("start", "shape"), edge("shape", "check"), `{"block_id":"check","target_block_id":"big","branch":"true"}`))
		_, err := epochs.Bump(t.Context(), redis.Key(keys, b.org)) // as the editor does after its commit
		require.NoError(t, err)
	}
	write(1, "one")

	const n = 40
	ids := make([]string, n)
	var wg sync.WaitGroup
	for i := range n {
		wg.Go(func() {
			ids[i] = b.startRun(t, "wf_cached", map[string]any{"input": map[string]any{"n": i}})
		})
	}
	wg.Wait()
	for i, id := range ids {
		got := b.waitStatus(t, id, "completed")
		require.EqualValues(t, 1, got["workflowVersion"])
		if i > 2 {
			require.Equal(t, map[string]any{"message": "big one"}, got["output"].(map[string]any)["big"], "run %d", i)
		}
	}
	reads := sys.editor.reads.Load()
	require.Less(t, reads, int64(n), "the cache spared editor reads")
	t.Logf("%d concurrent starts, %d editor reads", n, reads)

	write(2, "two")
	got := b.waitStatus(t, b.startRun(t, "wf_cached", map[string]any{"input": map[string]any{"n": 5}}), "completed")
	require.EqualValues(t, 2, got["workflowVersion"], "the announced change is pinned by the next start")
	require.Equal(t, map[string]any{"message": "big two"}, got["output"].(map[string]any)["big"])
	require.Equal(t, reads+1, sys.editor.reads.Load())
}
