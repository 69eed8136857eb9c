package service_test

import (
	"net/http"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"
)

// TestSchedulePagesAreBoundedInBytes: schedules may hold inputs near the 1 MiB body limit, so
// a page of 500 of them would be 500 MiB built in the scheduler's memory. A page stops at
// 1 MiB of inputs (the first schedule always comes), with a cursor, and paging to the end sees
// every schedule once, nextCursor null only after the last page.
func TestSchedulePagesAreBoundedInBytes(t *testing.T) {
	t.Parallel()
	sys := start(t, nil)
	b := sys.setup(t)
	wf := b.workflow(t)
	big := strings.Repeat("x", 400<<10)
	const n = 7
	for range n {
		b.create(t, map[string]any{"workflowId": wf, "cron": "@daily", "input": map[string]any{"blob": big}})
	}

	seen := map[string]int{}
	cursor, pages := "", 0
	for {
		path := "/api/schedules?limit=500"
		if cursor != "" {
			path += "&after=" + cursor
		}
		r := b.do(t, "GET", path, nil)
		require.Equal(t, http.StatusOK, r.Status, r.Raw)
		require.Less(t, len(r.Raw), 1<<20+64<<10, "a page is bounded in bytes, whatever its limit")
		pages++
		list := items(t, r.Body["items"])
		require.NotEmpty(t, list)
		for _, it := range list {
			seen[it["id"].(string)]++
		}
		next, _ := r.Body["nextCursor"].(string)
		if next == "" {
			require.Nil(t, r.Body["nextCursor"])
			break
		}
		cursor = next
	}
	require.Len(t, seen, n)
	for id, c := range seen {
		require.Equal(t, 1, c, id)
	}
	require.GreaterOrEqual(t, pages, 3, "seven schedules of 400 KiB take several pages")
}
