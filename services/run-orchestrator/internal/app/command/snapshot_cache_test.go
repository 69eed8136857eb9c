package command

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"svc.dev/services/run-orchestrator/internal/app/port"
	"svc.dev/services/run-orchestrator/internal/domain/run"
)

// editorModel is the editor as the snapshot cache relies on it: a write commits a new version,
// then moves its organization's epoch, then returns. moveEpochs false models an editor that
// forgot the second step.
type editorModel struct {
	moveEpochs bool

	mu       sync.Mutex
	versions map[string]int64 // by org + "/" + id; absent: no such workflow
	epochs   map[string]int64
	reads    atomic.Int32
	down     atomic.Bool // the epochs cannot be read
}

func newEditorModel() *editorModel {
	return &editorModel{moveEpochs: true, versions: map[string]int64{}, epochs: map[string]int64{}}
}

// write commits a new version of org/id (creating it at 1) and returns it once answered.
func (m *editorModel) write(org, id string) int64 {
	m.mu.Lock()
	m.versions[org+"/"+id]++
	v := m.versions[org+"/"+id]
	m.mu.Unlock()
	m.answered(org)
	return v
}

func (m *editorModel) remove(org, id string) {
	m.mu.Lock()
	delete(m.versions, org+"/"+id)
	m.mu.Unlock()
	m.answered(org)
}

// answered is what the editor does between a write's commit and its answer: it moves the
// organization's epoch (unless moveEpochs is off).
func (m *editorModel) answered(org string) {
	if !m.moveEpochs {
		return
	}
	m.mu.Lock()
	m.epochs[org]++
	m.mu.Unlock()
}

func (m *editorModel) Workflow(_ context.Context, org string, ref port.WorkflowRef) (port.Snapshot, error) {
	m.reads.Add(1)
	m.mu.Lock()
	defer m.mu.Unlock()
	v, ok := m.versions[org+"/"+ref.ID]
	if !ok {
		return port.Snapshot{}, run.ErrWorkflowNotFound
	}
	def := fmt.Sprintf(`{"blocks":[{"block_id":"t","type":"trigger.manual","params":{}},{"block_id":"say","type":"log","params":{"message":"v%d"}}],"edges":[{"block_id":"t","target_block_id":"say"}]}`, v)
	return port.Snapshot{ID: ref.ID, Version: v, Definition: json.RawMessage(def)}, nil
}

func (m *editorModel) Epochs(_ context.Context, orgs []string) ([]int64, error) {
	if m.down.Load() {
		return nil, errors.New("redis: connection refused")
	}
	m.mu.Lock()
	defer m.mu.Unlock()
	out := make([]int64, len(orgs))
	for i, org := range orgs {
		out[i] = m.epochs[org] + 1000 // never 0 ("unknown")
	}
	return out, nil
}

// pinEngine stores nothing; it remembers the version each run pinned.
type pinEngine struct {
	port.Engine
	pinned sync.Map // run id -> int64
}

func (e *pinEngine) DispatchMany(_ context.Context, runs []run.NewRun, _ []string) ([]string, error) {
	ids := make([]string, len(runs))
	for i, r := range runs {
		e.pinned.Store(r.ID, r.WorkflowVersion)
		ids[i] = r.ID
	}
	return ids, nil
}

func (e *pinEngine) RunsForKeys(_ context.Context, orgs, _ []string) ([]string, error) {
	return make([]string, len(orgs)), nil
}

func (e *pinEngine) version(t *testing.T, id string) int64 {
	t.Helper()
	v, ok := e.pinned.Load(id)
	require.True(t, ok, "run %s was not stored", id)
	return v.(int64)
}

func cachedHandler(m *editorModel, engine port.Engine, ttl time.Duration, now func() time.Time) StartRunsHandler {
	return NewStartRunsHandler(m, engine).WithCache(NewSnapshotCache(m, ttl, 0, now))
}

func startOne(t *testing.T, h StartRunsHandler, org, wf string) StartRunResult {
	t.Helper()
	res, err := h.Handle(t.Context(), []StartRun{{OrganizationID: org, Workflow: port.WorkflowRef{ID: wf}}})
	require.NoError(t, err)
	return res[0]
}

// Repeated starts read the editor once; a write that returned is seen by the next start.
func TestSnapshotCacheServesUntilTheEpochMoves(t *testing.T) {
	t.Parallel()
	m, engine := newEditorModel(), &pinEngine{}
	h := cachedHandler(m, engine, time.Hour, nil)
	m.write("org_a", "wf_1")
	for range 5 {
		r := startOne(t, h, "org_a", "wf_1")
		require.NoError(t, r.Err)
		require.Equal(t, int64(1), engine.version(t, r.Started.RunID))
	}
	require.Equal(t, int32(1), m.reads.Load(), "one editor read for five starts")

	m.write("org_a", "wf_1")
	r := startOne(t, h, "org_a", "wf_1")
	require.Equal(t, int64(2), engine.version(t, r.Started.RunID), "the patch that returned is pinned")
	require.Equal(t, int32(2), m.reads.Load())

	// A write to another workflow of the organization moves the same epoch: one more read.
	m.write("org_a", "wf_other")
	startOne(t, h, "org_a", "wf_1")
	require.Equal(t, int32(3), m.reads.Load())
	// Another organization's writes do not.
	m.write("org_b", "wf_1")
	startOne(t, h, "org_a", "wf_1")
	require.Equal(t, int32(3), m.reads.Load())

	m.remove("org_a", "wf_1")
	r = startOne(t, h, "org_a", "wf_1")
	require.ErrorIs(t, r.Err, run.ErrWorkflowNotFound, "a deleted workflow is not started from the cache")
}

// The test above can fail: an editor that does not move the epoch leaves a stale snapshot in
// use, so a start after a returned patch pins the old version.
func TestSnapshotCacheWithoutEpochMovesIsStale(t *testing.T) {
	t.Parallel()
	m, engine := newEditorModel(), &pinEngine{}
	m.moveEpochs = false
	h := cachedHandler(m, engine, time.Hour, nil)
	m.write("org_a", "wf_1")
	startOne(t, h, "org_a", "wf_1")
	m.write("org_a", "wf_1")
	r := startOne(t, h, "org_a", "wf_1")
	require.Equal(t, int64(1), engine.version(t, r.Started.RunID))
}

// Without readable epochs nothing is cached: every batch reads the editor.
func TestSnapshotCacheUnusedWithoutEpochs(t *testing.T) {
	t.Parallel()
	m, engine := newEditorModel(), &pinEngine{}
	h := cachedHandler(m, engine, time.Hour, nil)
	m.write("org_a", "wf_1")
	m.down.Store(true)
	for range 3 {
		require.NoError(t, startOne(t, h, "org_a", "wf_1").Err)
	}
	require.Equal(t, int32(3), m.reads.Load())
	m.down.Store(false)
	startOne(t, h, "org_a", "wf_1")
	startOne(t, h, "org_a", "wf_1")
	require.Equal(t, int32(4), m.reads.Load())

	// A failed read drops what was kept: an entry does not outlive an outage in which the
	// editor may have failed to move the epoch.
	m.down.Store(true)
	startOne(t, h, "org_a", "wf_1")
	m.down.Store(false)
	startOne(t, h, "org_a", "wf_1")
	require.Equal(t, int32(6), m.reads.Load())
}

// Entries expire after the TTL even while the epoch stands still; errors are never kept.
func TestSnapshotCacheExpiresAndKeepsNoErrors(t *testing.T) {
	t.Parallel()
	var clock atomic.Int64
	now := func() time.Time { return time.Unix(0, clock.Load()) }
	m, engine := newEditorModel(), &pinEngine{}
	h := cachedHandler(m, engine, time.Second, now)
	m.write("org_a", "wf_1")
	startOne(t, h, "org_a", "wf_1")
	clock.Add(int64(999 * time.Millisecond))
	startOne(t, h, "org_a", "wf_1")
	require.Equal(t, int32(1), m.reads.Load())
	clock.Add(int64(time.Millisecond))
	startOne(t, h, "org_a", "wf_1")
	require.Equal(t, int32(2), m.reads.Load(), "expired")

	for range 3 {
		require.ErrorIs(t, startOne(t, h, "org_a", "wf_missing").Err, run.ErrWorkflowNotFound)
	}
	require.Equal(t, int32(5), m.reads.Load(), "a not-found answer is read again every time")
}

// The byte budget evicts the least recently used snapshot.
func TestSnapshotCacheByteBudget(t *testing.T) {
	t.Parallel()
	m := newEditorModel()
	size := 0
	c := NewSnapshotCache(m, time.Hour, 3*(entryOverhead+200), nil)
	put := func(id string) {
		snap, _ := m.Workflow(t.Context(), "org_a", port.WorkflowRef{ID: id})
		size = len(snap.Definition)
		c.put(workflowKey{"org_a", port.WorkflowRef{ID: id}}, prepare(snap), 1)
	}
	for _, id := range []string{"wf_1", "wf_2", "wf_3", "wf_4", "wf_5"} {
		m.write("org_a", id)
	}
	require.Less(t, size, 200)
	put("wf_1")
	put("wf_2")
	put("wf_3")
	_, ok := c.get(workflowKey{"org_a", port.WorkflowRef{ID: "wf_1"}}, 1) // wf_1 is now the most recent
	require.True(t, ok)
	put("wf_4")
	put("wf_5")
	require.Equal(t, 3, c.Len())
	for id, kept := range map[string]bool{"wf_1": true, "wf_2": false, "wf_3": false, "wf_4": true, "wf_5": true} {
		_, ok := c.get(workflowKey{"org_a", port.WorkflowRef{ID: id}}, 1)
		require.Equal(t, kept, ok, id)
	}
}

// Under concurrency: while a workflow is written over and over, every start pins a version
// at least as new as the last write that had returned before the start began, and the cache
// still spares most editor reads.
func TestSnapshotCacheExactUnderConcurrency(t *testing.T) {
	t.Parallel()
	m, engine := newEditorModel(), &pinEngine{}
	h := cachedHandler(m, engine, time.Hour, nil)
	var latest atomic.Int64
	latest.Store(m.write("org_a", "wf_1"))

	const writes, starters, startsEach = 200, 8, 400
	type pin struct {
		id    string
		floor int64
	}
	var (
		wg    sync.WaitGroup
		mu    sync.Mutex
		pins  []pin
		total atomic.Int32
	)
	wg.Go(func() {
		for range writes {
			latest.Store(m.write("org_a", "wf_1"))
			time.Sleep(50 * time.Microsecond) // let starts hit the cache between writes
		}
	})
	for range starters {
		wg.Go(func() {
			for range startsEach {
				floor := latest.Load()
				res, err := h.Handle(context.Background(), []StartRun{{OrganizationID: "org_a", Workflow: port.WorkflowRef{ID: "wf_1"}}})
				if err != nil || res[0].Err != nil {
					panic(fmt.Sprint(err, res))
				}
				total.Add(1)
				mu.Lock()
				pins = append(pins, pin{res[0].Started.RunID, floor})
				mu.Unlock()
			}
		})
	}
	wg.Wait()
	require.Len(t, pins, starters*startsEach)
	for _, p := range pins {
		v := engine.version(t, p.id)
		require.GreaterOrEqual(t, v, p.floor, "run %s pinned %d after version %d had returned", p.id, v, p.floor)
	}
	t.Logf("%d starts, %d writes, %d editor reads", total.Load(), writes, m.reads.Load())
	require.Less(t, int(m.reads.Load()), starters*startsEach, "the cache spared editor reads")
}
