package postgres_test

import (
	"encoding/json"
	"strings"
	"testing"
	"time"

	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/stretchr/testify/require"

	"svc.dev/libs/testkit"
	"svc.dev/libs/wire"
	"svc.dev/services/run-orchestrator/internal/adapters/postgres"
	"svc.dev/services/run-orchestrator/internal/app/port"
	"svc.dev/services/run-orchestrator/internal/domain/run"
	"svc.dev/services/run-orchestrator/migrations"
)

// blob is a JSON string of about n bytes.
func blob(n int) json.RawMessage {
	return json.RawMessage(`"` + strings.Repeat("z", n) + `"`)
}

func TestRunReaderPages(t *testing.T) {
	t.Parallel()

	type testBundle struct {
		pool   *pgxpool.Pool
		reader *postgres.RunReader
		org    string
	}

	setup := func(t *testing.T) *testBundle {
		t.Helper()
		pool := testkit.NewSchema(t, migrations.FS)
		return &testBundle{pool: pool, reader: postgres.NewRunReader(pool), org: wire.NewID(wire.Organization)}
	}

	// addRun stores a finished run of wf whose input and output are JSON strings of the given
	// sizes, with a definition of defBytes the lists must not read; it returns its id.
	addRun := func(t *testing.T, b *testBundle, wf string, status run.Status, in, out, defBytes int) string {
		t.Helper()
		id := wire.NewID(wire.Run)
		_, err := b.pool.Exec(t.Context(), `WITH d AS (INSERT INTO run_definitions (organization_id, workflow_id, hash, definition)
				VALUES ($2, $3, sha256(convert_to($4, 'UTF8')), jsonb_build_object('pad', $4::text)) ON CONFLICT DO NOTHING)
			INSERT INTO runs (id, organization_id, workflow_id, workflow_version, definition_hash, status, input, output, trigger)
			VALUES ($1, $2, $3, 1, sha256(convert_to($4, 'UTF8')), $5, $6, $7, '{"kind":"manual"}')`,
			id, b.org, wf, strings.Repeat("d", defBytes), string(status), blob(in), blob(out))
		require.NoError(t, err)
		return id
	}

	// listAll pages org's list under f to the end and returns each page.
	listAll := func(t *testing.T, b *testBundle, f run.ListFilter, maxBytes int64) [][]run.Record {
		t.Helper()
		var pages [][]run.Record
		for {
			p, err := b.reader.List(t.Context(), b.org, f, maxBytes)
			require.NoError(t, err)
			pages = append(pages, p.Runs)
			if !p.More {
				return pages
			}
			require.NotEmpty(t, p.Runs, "a page that says more follows holds a run")
			f.After = p.Runs[len(p.Runs)-1].ID
		}
	}

	size := func(r run.Record) int { return len(r.Input) + len(r.Output) + len(r.Error) + len(r.Trigger) }

	t.Run("ListStopsAtTheBudgetAndPagesEveryRunOnce", func(t *testing.T) {
		t.Parallel()
		b := setup(t)
		wf := wire.NewID(wire.Workflow)
		want := map[string]bool{}
		for range 30 {
			want[addRun(t, b, wf, run.StatusCompleted, 10<<10, 10<<10, 50<<10)] = true
		}
		const budget = 64 << 10
		for _, f := range []run.ListFilter{{Limit: 500}, {WorkflowID: wf, Limit: 500}, {Status: run.StatusCompleted, Limit: 500}} {
			pages := listAll(t, b, f, budget)
			seen := map[string]int{}
			last := ""
			for _, p := range pages {
				total := 0
				for _, r := range p {
					total += size(r)
					seen[r.ID]++
					require.Zero(t, len(r.Definition), "a list never reads definitions")
					if last != "" {
						require.Less(t, r.ID, last, "newest first")
					}
					last = r.ID
				}
				require.LessOrEqual(t, total, budget)
			}
			require.Len(t, pages, 10, "3 runs of 20 KiB a page")
			require.Len(t, seen, len(want))
			for id, n := range seen {
				require.True(t, want[id])
				require.Equal(t, 1, n, "run %s listed once", id)
			}
		}
	})

	t.Run("ABigRunComesAlone", func(t *testing.T) {
		t.Parallel()
		b := setup(t)
		wf := wire.NewID(wire.Workflow)
		small1 := addRun(t, b, wf, run.StatusCompleted, 10, 10, 10)
		huge := addRun(t, b, wf, run.StatusCompleted, 200<<10, 0, 10)
		small2 := addRun(t, b, wf, run.StatusCompleted, 10, 10, 10)
		pages := listAll(t, b, run.ListFilter{Limit: 50}, 64<<10)
		require.Len(t, pages, 3)
		require.Equal(t, small2, pages[0][0].ID)
		require.Len(t, pages[1], 1)
		require.Equal(t, huge, pages[1][0].ID, "a run bigger than the budget is a page of its own")
		require.Equal(t, 200<<10+2, len(pages[1][0].Input))
		require.Equal(t, small1, pages[2][0].ID)
	})

	t.Run("TheLimitStillCounts", func(t *testing.T) {
		t.Parallel()
		b := setup(t)
		wf := wire.NewID(wire.Workflow)
		for range 5 {
			addRun(t, b, wf, run.StatusCompleted, 10, 10, 10)
		}
		p, err := b.reader.List(t.Context(), b.org, run.ListFilter{Limit: 2}, port.PageBytes)
		require.NoError(t, err)
		require.Len(t, p.Runs, 2)
		require.True(t, p.More)
		p, err = b.reader.List(t.Context(), b.org, run.ListFilter{Limit: 5}, port.PageBytes)
		require.NoError(t, err)
		require.Len(t, p.Runs, 5)
		require.False(t, p.More, "the last page says so even when it is full")
		p, err = b.reader.List(t.Context(), b.org, run.ListFilter{Limit: 5, Status: run.StatusFailed}, port.PageBytes)
		require.NoError(t, err)
		require.Empty(t, p.Runs)
		require.False(t, p.More)
	})

	t.Run("LogsStopAtTheBudget", func(t *testing.T) {
		t.Parallel()
		b := setup(t)
		id := addRun(t, b, wire.NewID(wire.Workflow), run.StatusCompleted, 10, 10, 10)
		sizes := []int{10 << 10, 10 << 10, 10 << 10, 100 << 10, 10 << 10, 1, 1, 1, 30 << 10, 30 << 10}
		for i, n := range sizes {
			_, err := b.pool.Exec(t.Context(), `INSERT INTO step_attempts (id, run_id, block_id, type, attempt, status, input, output, replica, seq, started_at)
				VALUES ($1, $2, $3, 'transform', 1, 'succeeded', $4, $4, 'r', $5, now())`,
				wire.NewID(wire.Attempt), id, "b"+string(rune('a'+i)), blob(n/2), int64(2*i+1))
			require.NoError(t, err)
		}
		var (
			pages [][]string
			after int64
		)
		for {
			items, err := b.reader.Logs(t.Context(), b.org, id, after, 1000, 32<<10)
			require.NoError(t, err)
			if len(items) == 0 {
				break
			}
			var blocks []string
			for _, a := range items {
				require.Greater(t, a.Seq, after)
				blocks = append(blocks, a.BlockID)
				after = a.Seq
			}
			pages = append(pages, blocks)
		}
		require.Equal(t, [][]string{{"ba", "bb", "bc"}, {"bd"}, {"be", "bf", "bg", "bh"}, {"bi"}, {"bj"}}, pages,
			"each page holds what fits in 32 KiB, a 100 KiB attempt alone, every attempt once")

		items, err := b.reader.Logs(t.Context(), b.org, id, 0, 3, port.PageBytes)
		require.NoError(t, err)
		require.Len(t, items, 3, "the limit still counts")
	})

	t.Run("OrgStreamReadsStatusesOnly", func(t *testing.T) {
		t.Parallel()
		b := setup(t)
		wf := wire.NewID(wire.Workflow)
		for range 3 {
			addRun(t, b, wf, run.StatusCompleted, 100<<10, 100<<10, 100<<10)
		}
		failed := addRun(t, b, wf, run.StatusFailed, 10, 0, 10)
		_, err := b.pool.Exec(t.Context(), `UPDATE runs SET error = jsonb_build_object('block_id', 'boom', 'message', repeat('m', 100000)) WHERE id = $1`, failed)
		require.NoError(t, err)
		statuses := postgres.NewOrgStatusReader(b.pool)
		page, _, err := statuses.StatusesAfter(t.Context(), b.org, "", port.StatusKey{At: time.Now().Add(-time.Hour)}, 200)
		require.NoError(t, err)
		require.Len(t, page, 4)
		one, err := statuses.Status(t.Context(), b.org, failed)
		require.NoError(t, err)
		for _, r := range append([]run.Record{one}, page[0].Run, page[1].Run, page[2].Run, page[3].Run) {
			require.Zero(t, len(r.Input), "a status event sends no input: the catch-up does not read it")
			require.Zero(t, len(r.Output))
			require.Zero(t, len(r.Definition))
			require.Zero(t, len(r.Trigger))
			require.NotEmpty(t, r.Status)
			require.Less(t, len(r.Error), 5000, "the error's message is cut")
		}
		var e struct {
			BlockID string `json:"block_id"`
			Message string `json:"message"`
		}
		require.NoError(t, json.Unmarshal(one.Error, &e))
		require.Equal(t, "boom", e.BlockID)
		require.Equal(t, strings.Repeat("m", 4096), e.Message)
		_, err = statuses.Status(t.Context(), wire.NewID(wire.Organization), failed)
		require.ErrorIs(t, err, run.ErrNotFound)
	})
}
