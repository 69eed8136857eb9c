package mcptools_test

import (
	"encoding/json"
	"fmt"
	"net/http"
	"net/http/httptest"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"
	"github.com/stretchr/testify/require"

	api "svc.dev/clients/apiclient"
	"svc.dev/clients/mcptools"
)

// listAPI serves /api/workflows and /api/schedules as the services page them (?after=&limit=,
// default 50, cursor = the last item's index), and counts the pages read.
type listAPI struct {
	mu    sync.Mutex
	pages map[string]int
	items map[string][]string // path -> items' JSON
}

func (a *listAPI) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	items, ok := a.items[r.URL.Path]
	if !ok {
		http.NotFound(w, r)
		return
	}
	a.mu.Lock()
	a.pages[r.URL.Path]++
	a.mu.Unlock()
	limit, from := 50, 0
	if l := r.URL.Query().Get("limit"); l != "" {
		limit, _ = strconv.Atoi(l)
	}
	if c := r.URL.Query().Get("after"); c != "" {
		n, _ := strconv.Atoi(c)
		from = n + 1
	}
	to := min(from+limit, len(items))
	next := "null"
	if to < len(items) {
		next = strconv.Quote(strconv.Itoa(to - 1))
	}
	w.Header().Set("Content-Type", "application/json")
	_, _ = fmt.Fprintf(w, `{"items":[%s],"nextCursor":%s}`, strings.Join(items[from:to], ","), next)
}

func (a *listAPI) read(path string) int {
	a.mu.Lock()
	defer a.mu.Unlock()
	return a.pages[path]
}

// TestListToolsPage (issue 21): the list tools answer one page and its next_cursor instead of
// reading every page of the organization's list into one answer, and a page whose items are
// large is cut to a bounded answer whose cursor is still the API's.
func TestListToolsPage(t *testing.T) {
	t.Parallel()

	type testBundle struct {
		api     *listAPI
		session *mcp.ClientSession
	}

	setup := func(t *testing.T) *testBundle {
		t.Helper()
		la := &listAPI{pages: map[string]int{}, items: map[string][]string{}}
		for i := range 120 {
			la.items["/api/workflows"] = append(la.items["/api/workflows"],
				fmt.Sprintf(`{"id":"wf_%03d","name":"w%d","description":"","version":1,"createdAt":"","updatedAt":""}`, i, i))
			// Schedules whose inputs are 40 KiB each: 50 of them are 2 MB.
			la.items["/api/schedules"] = append(la.items["/api/schedules"],
				fmt.Sprintf(`{"id":"sch_%03d","workflowId":"wf_1","cron":"@hourly","timezone":"UTC","input":%q,"enabled":true,"createdAt":"","updatedAt":""}`,
					i, strings.Repeat("i", 40<<10)))
		}
		srv := httptest.NewServer(la)
		t.Cleanup(srv.Close)
		c, err := api.NewClient(srv.URL, &http.Client{Timeout: 5 * time.Second}, "test")
		require.NoError(t, err)
		server := mcptools.NewServer(mcptools.Config{Principal: mcptools.Fixed(c, "svc_test"), Version: "test"})
		st, ct := mcp.NewInMemoryTransports()
		ss, err := server.Connect(t.Context(), st, nil)
		require.NoError(t, err)
		t.Cleanup(func() { _ = ss.Close() })
		cs, err := mcp.NewClient(&mcp.Implementation{Name: "test", Version: "1"}, nil).Connect(t.Context(), ct, nil)
		require.NoError(t, err)
		t.Cleanup(func() { _ = cs.Close() })
		return &testBundle{api: la, session: cs}
	}

	// call calls tool and returns its structured answer and the answer's size.
	call := func(t *testing.T, b *testBundle, tool string, args map[string]any) (map[string]any, int) {
		t.Helper()
		res, err := b.session.CallTool(t.Context(), &mcp.CallToolParams{Name: tool, Arguments: args})
		require.NoError(t, err)
		require.False(t, res.IsError, "%+v", res.Content)
		raw, err := json.Marshal(res.StructuredContent)
		require.NoError(t, err)
		var out map[string]any
		require.NoError(t, json.Unmarshal(raw, &out))
		return out, len(raw)
	}

	// pageAll follows next_cursor to the end and returns the ids seen and the calls made.
	pageAll := func(t *testing.T, b *testBundle, tool, member string, args map[string]any) (map[string]int, int) {
		t.Helper()
		seen, calls := map[string]int{}, 0
		for {
			out, size := call(t, b, tool, args)
			calls++
			require.LessOrEqual(t, size, 300<<10, "%s: an answer of %d bytes", tool, size)
			for _, it := range out[member].([]any) {
				seen[it.(map[string]any)["id"].(string)]++
			}
			next, ok := out["next_cursor"].(string)
			if !ok {
				return seen, calls
			}
			args["after"] = next
		}
	}

	t.Run("WorkflowsListReadsOnePage", func(t *testing.T) {
		t.Parallel()
		b := setup(t)
		out, _ := call(t, b, "workflows_list", map[string]any{})
		require.Len(t, out["workflows"], 50, "the API's default page")
		require.NotNil(t, out["next_cursor"])
		require.Equal(t, 1, b.api.read("/api/workflows"), "one page read, not the whole list")
		seen, calls := pageAll(t, b, "workflows_list", "workflows", map[string]any{"limit": 100})
		require.Len(t, seen, 120)
		for id, n := range seen {
			require.Equal(t, 1, n, id)
		}
		require.Equal(t, 2, calls)
	})

	t.Run("SchedulesListIsBoundedInBytes", func(t *testing.T) {
		t.Parallel()
		b := setup(t)
		seen, calls := pageAll(t, b, "schedules_list", "schedules", map[string]any{"limit": 500})
		require.Len(t, seen, 120, "every schedule once")
		for id, n := range seen {
			require.Equal(t, 1, n, id)
		}
		require.Greater(t, calls, 10, "pages of about 256 KiB")
		require.LessOrEqual(t, b.api.read("/api/schedules"), 2*calls, "at most one more read per answer")
	})
}
