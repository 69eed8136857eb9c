package command

import (
	"context"
	"encoding/json"
	"fmt"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"svc.dev/services/run-orchestrator/internal/app/port"
	"svc.dev/services/run-orchestrator/internal/domain/run"
)

// gateCatalog answers every workflow read, holding each until open is closed, and counts them.
type gateCatalog struct {
	open  chan struct{}
	reads atomic.Int32
}

func (c *gateCatalog) Workflow(ctx context.Context, org string, ref port.WorkflowRef) (port.Snapshot, error) {
	c.reads.Add(1)
	select {
	case <-c.open:
	case <-ctx.Done():
		return port.Snapshot{}, ctx.Err()
	}
	return port.Snapshot{ID: ref.ID, Version: 1, Definition: json.RawMessage(`{"blocks":[{"block_id":"t","type":"trigger.manual","params":{}}],"edges":[]}`)}, nil
}

// batchEngine stores nothing; it records each batch's size.
type batchEngine struct {
	port.Engine
	mu      sync.Mutex
	batches []int
}

func (e *batchEngine) DispatchMany(_ context.Context, runs []run.NewRun, _ []string) ([]string, error) {
	e.mu.Lock()
	defer e.mu.Unlock()
	e.batches = append(e.batches, len(runs))
	ids := make([]string, len(runs))
	for i, r := range runs {
		ids[i] = r.ID
	}
	return ids, nil
}

func (e *batchEngine) RunsForKeys(_ context.Context, orgs, _ []string) ([]string, error) {
	return make([]string, len(orgs)), nil
}

func (g *StartGroup) waiting() int {
	g.mu.Lock()
	defer g.mu.Unlock()
	return len(g.queue)
}

// TestStartGroupGathersOnlyWhileBusy: starts that find a free slot go alone and at once;
// those that arrive while every slot is busy go together in one batch; every caller gets the
// answer to its own start.
func TestStartGroupGathersOnlyWhileBusy(t *testing.T) {
	t.Parallel()
	catalog := &gateCatalog{open: make(chan struct{})}
	engine := &batchEngine{}
	g := NewStartGroup(NewStartRunsHandler(catalog, engine), 4)

	type answer struct {
		input string
		id    string
		err   error
	}
	answers := make(chan answer, 64)
	start := func(i int) {
		input := fmt.Sprintf(`{"n":%d}`, i)
		go func() {
			s, err := g.Handle(t.Context(), StartRun{OrganizationID: "org_1", Workflow: port.WorkflowRef{ID: "wf_1"}, Input: json.RawMessage(input)})
			answers <- answer{input, s.RunID, err}
		}()
	}
	for i := range 4 {
		start(i)
		require.Eventually(t, func() bool { return catalog.reads.Load() == int32(i+1) }, 10*time.Second, time.Millisecond,
			"a start that finds a free slot goes at once, alone")
	}
	for i := 4; i < 24; i++ {
		start(i)
	}
	require.Eventually(t, func() bool { return g.waiting() == 20 }, 10*time.Second, time.Millisecond, "the rest wait for a slot")
	close(catalog.open)

	ids := map[string]string{}
	for range 24 {
		a := <-answers
		require.NoError(t, a.err)
		require.NotEmpty(t, a.id)
		require.NotContains(t, ids, a.id, "one run per start")
		ids[a.id] = a.input
	}
	require.Equal(t, int32(5), catalog.reads.Load(), "the 20 that waited read their workflow once")
	engine.mu.Lock()
	defer engine.mu.Unlock()
	require.ElementsMatch(t, []int{1, 1, 1, 1, 20}, engine.batches)
}

// TestStartGroupAnswersEachStart: bad starts are answered before any batch; a batch's
// failure is every one of its callers' answer; a panic in a batch is an answer too.
func TestStartGroupAnswersEachStart(t *testing.T) {
	t.Parallel()
	catalog := &gateCatalog{open: make(chan struct{})}
	close(catalog.open)
	g := NewStartGroup(NewStartRunsHandler(catalog, &batchEngine{}), 0)
	_, err := g.Handle(t.Context(), StartRun{OrganizationID: "org_1", Workflow: port.WorkflowRef{ID: "bad\x00id"}})
	require.ErrorIs(t, err, run.ErrWorkflowNotFound)
	_, err = g.Handle(t.Context(), StartRun{OrganizationID: "org_1", Workflow: port.WorkflowRef{ID: "wf_1"}, IdempotencyKey: "k\x01"})
	var invalid *run.InvalidInputError
	require.ErrorAs(t, err, &invalid)

	failing := NewStartGroup(NewStartRunsHandler(catalog, &panicEngine{}), 1)
	_, err = failing.Handle(t.Context(), StartRun{OrganizationID: "org_1", Workflow: port.WorkflowRef{ID: "wf_1"}})
	var de *port.DispatchError
	require.ErrorAs(t, err, &de)
	// The group goes on after a panic.
	_, err = failing.Handle(t.Context(), StartRun{OrganizationID: "org_1", Workflow: port.WorkflowRef{ID: "wf_1"}})
	require.ErrorAs(t, err, &de)
}

type panicEngine struct{ batchEngine }

func (*panicEngine) DispatchMany(context.Context, []run.NewRun, []string) ([]string, error) {
	panic("boom")
}
