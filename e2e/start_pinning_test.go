package e2e

import (
	"bytes"
	"encoding/json"
	"fmt"
	"net/http"
	"sync"
	"sync/atomic"
	"testing"

	"github.com/stretchr/testify/require"
)

// TestConcurrentStartsPinTheCurrentVersion (issue 16): starts are gathered into batches that
// read each workflow once (app.StartGroup), and the orchestrator keeps the snapshots it read
// while the organization's catalog epoch stands still (app.SnapshotCache, on by default); both
// stay exact: while a workflow is patched over and over, every run started concurrently pins a
// version at least as new as the last patch that had returned before its start was sent, and
// every start is answered with a run of its own. With the editor's epoch increment removed,
// this test fails (a run pins version 1 after version 2 returned).
func TestConcurrentStartsPinTheCurrentVersion(t *testing.T) {
	t.Parallel()
	sys := startIdentitySystem(t, map[string]string{"SVC_RATE_LIMIT_PER_MINUTE": "1000000"})
	u := newRunsUser(t, sys, "pinning-race").byAPIKey()
	wf := u.workflow("moving", wfDef(wfBlocks(wfTrigger(nil), wfBlock("say", "log", map[string]any{"message": "v1"})), wfEdge("start", "say")))

	post := func(path string, body any) (int, map[string]any, error) {
		b, _ := json.Marshal(body)
		req, err := http.NewRequestWithContext(t.Context(), http.MethodPost, u.c.base+path, bytes.NewReader(b))
		if err != nil {
			return 0, nil, err
		}
		req.Header.Set("Content-Type", "application/json")
		req.Header.Set("X-Api-Key", u.c.apiKey)
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			return 0, nil, err
		}
		defer resp.Body.Close()
		var out map[string]any
		err = json.NewDecoder(resp.Body).Decode(&out)
		return resp.StatusCode, out, err
	}

	const patches, starters, startsEach = 25, 8, 12
	var latest atomic.Int64 // the version of the last patch that returned
	latest.Store(1)
	type started struct {
		runID string
		floor int64
	}
	var (
		mu     sync.Mutex
		runs   []started
		failed []error
		wg     sync.WaitGroup
	)
	fail := func(err error) {
		mu.Lock()
		defer mu.Unlock()
		failed = append(failed, err)
	}
	wg.Go(func() {
		for k := 2; k <= patches+1; k++ {
			status, body, err := post("/api/workflows/"+wf+"/operations", map[string]any{"ops": []any{
				map[string]any{"operation_type": "update", "block_id": "say", "params": map[string]any{"message": fmt.Sprintf("v%d", k)}},
			}})
			if err != nil || status != http.StatusOK {
				fail(fmt.Errorf("patch %d: %d %v: %w", k, status, body, err))
				return
			}
			latest.Store(int64(body["version"].(float64)))
		}
	})
	for range starters {
		wg.Go(func() {
			for range startsEach {
				floor := latest.Load()
				status, body, err := post("/api/workflows/"+wf+"/run", map[string]any{})
				if err != nil || status != http.StatusAccepted {
					fail(fmt.Errorf("start: %d %v: %w", status, body, err))
					return
				}
				mu.Lock()
				runs = append(runs, started{body["runId"].(string), floor})
				mu.Unlock()
			}
		})
	}
	wg.Wait()
	require.Empty(t, failed)
	require.Len(t, runs, starters*startsEach)
	seen := map[string]bool{}
	newer := 0
	for _, r := range runs {
		require.False(t, seen[r.runID], "run %s answered twice", r.runID)
		seen[r.runID] = true
		got := u.run(r.runID)
		pinned := int64(got["workflowVersion"].(float64))
		require.GreaterOrEqual(t, pinned, r.floor, "run %s pinned version %d, but version %d had returned before its start", r.runID, pinned, r.floor)
		require.LessOrEqual(t, pinned, int64(patches+1))
		if pinned > r.floor {
			newer++
		}
	}
	t.Logf("%d starts during %d patches; %d pinned a version newer than the last patch seen before the start was sent", len(runs), patches, newer)
}
