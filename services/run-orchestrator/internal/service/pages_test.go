package service_test

import (
	"net/http"
	"net/url"
	"strings"
	"sync"
	"testing"

	"github.com/stretchr/testify/require"

	"svc.dev/libs/wire"
)

// pageBudget is the orchestrator's page budget (port.PageBytes) as a client sees it; a page may
// pass it by the one item it always holds.
const pageBudget = 1 << 20

// TestPagesAreBoundedInBytes (issue 21): a tenant whose runs hold near-1-MiB inputs gets pages
// of runs and of logs that stop at the byte budget and go on by their cursor, instead of a
// 500-run page (hundreds of MB) built in the shared process. Paging to the end still sees
// every run and every attempt exactly once.
func TestPagesAreBoundedInBytes(t *testing.T) {
	t.Parallel()
	sys := start(t)

	// page reads path (one page) and returns its items, its nextCursor ("" for null) and the
	// body's size.
	page := func(t *testing.T, b *testBundle, path string) ([]map[string]any, string, int) {
		t.Helper()
		r := b.do(t, "GET", path, nil)
		require.Equal(t, http.StatusOK, r.Status, r.Raw[:min(len(r.Raw), 300)])
		var items []map[string]any
		for _, it := range r.Body["items"].([]any) {
			items = append(items, it.(map[string]any))
		}
		next, _ := r.Body["nextCursor"].(string)
		return items, next, len(r.Raw)
	}

	t.Run("RunListsStopAtTheBudget", func(t *testing.T) {
		t.Parallel()
		b := sys.setup(t)
		wf := wire.NewID(wire.Workflow)
		b.workflow(t, wf, 1, def([]string{manual}))
		big := strings.Repeat("x", 900<<10)
		const n = 12
		want := map[string]bool{}
		var (
			mu sync.Mutex
			wg sync.WaitGroup
		)
		for range n {
			wg.Go(func() {
				id := b.startRun(t, wf, map[string]any{"input": map[string]any{"blob": big}})
				mu.Lock()
				want[id] = true
				mu.Unlock()
			})
		}
		wg.Wait()
		for _, base := range []string{"/api/runs?limit=100", "/api/workflows/" + wf + "/runs?limit=500", "/api/runs?limit=100&workflowId=" + wf} {
			seen := map[string]int{}
			cursor, pages := "", 0
			for {
				path := base
				if cursor != "" {
					path += "&after=" + url.QueryEscape(cursor)
				}
				items, next, size := page(t, b, path)
				pages++
				require.NotEmpty(t, items, "%s: a page with a cursor before it is never empty", path)
				require.LessOrEqual(t, size, pageBudget+len(big)+4096, "%s: %d runs in %d bytes", path, len(items), size)
				for _, it := range items {
					seen[it["runId"].(string)]++
					require.Len(t, it["input"].(map[string]any)["blob"], len(big), "the items keep their shape and content")
				}
				if next == "" {
					break
				}
				cursor = next
			}
			require.Len(t, seen, n, base)
			for id, c := range seen {
				require.True(t, want[id], "a run of this organization")
				require.Equal(t, 1, c, "%s: run %s seen once", base, id)
			}
			require.GreaterOrEqual(t, pages, n/2, "%s: the budget cut the pages", base)
		}
	})

	t.Run("LogsStopAtTheBudget", func(t *testing.T) {
		t.Parallel()
		b := sys.setup(t)
		wf := wire.NewID(wire.Workflow)
		// Each transform's resolved input and its output hold the run's input: 8 attempts of
		// about 600 KiB each.
		blocks := []string{manual}
		var edges []string
		prev := "start"
		for i := range 7 {
			id := "t" + string(rune('a'+i))
			blocks = append(blocks, `{"block_id":"`+id+`","type":"transform","params":{"value":"{{ input }}"}}`)
			edges = append(edges, edge(prev, id))
			prev = id
		}
		b.workflow(t, wf, 1, def(blocks, edges...))
		big := strings.Repeat("y", 300<<10)
		id := b.startRun(t, wf, map[string]any{"input": big})
		b.waitStatus(t, id, "completed")

		seen := map[string]int{}
		cursor := ""
		for {
			path := "/api/runs/" + id + "/logs?limit=1000"
			if cursor != "" {
				path += "&after=" + url.QueryEscape(cursor)
			}
			items, next, size := page(t, b, path)
			require.NotEmpty(t, next, "the logs' cursor is returned on every page")
			require.LessOrEqual(t, size, pageBudget+2*len(big)+4096, "%d attempts in %d bytes", len(items), size)
			if len(items) == 0 {
				break
			}
			for _, it := range items {
				seen[it["block_id"].(string)]++
			}
			cursor = next
		}
		require.Len(t, seen, 8)
		for block, c := range seen {
			require.Equal(t, 1, c, "attempt of %s listed once", block)
		}
	})
}
