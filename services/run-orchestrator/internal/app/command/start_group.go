package command

import (
	"context"
	"fmt"
	"sync"
	"time"

	"svc.dev/services/run-orchestrator/internal/app/port"
	"svc.dev/services/run-orchestrator/internal/domain/run"
)

// StartGroup answers single starts (POST /api/runs, webhook deliveries) through
// StartRunsHandler, gathered the way a database gathers commits: a start that finds one of the
// Parallel batch slots free goes at once, alone, so gathering adds no wait when nothing queues;
// the starts that arrive while every slot is busy wait and go together in the next batch: one
// editor read per workflow, one transaction, multi-row statements. Each caller is answered
// with its own result once its run is durable (202 still means stored), exactly as
// StartRunsHandler answers each item of a batch: the snapshot a run pins is read after its
// start arrived, so a patch that returned before the start is seen.
type StartGroup struct {
	batch    StartRunsHandler
	parallel int
	timeout  time.Duration

	mu    sync.Mutex
	queue []*groupedStart
	busy  int
}

// groupedStart is one caller's start and where its answer goes.
type groupedStart struct {
	ctx  context.Context
	cmd  StartRun
	done chan StartRunResult
}

// DefaultStartSlots is how many batches of starts one replica stores at once.
const DefaultStartSlots = 4

// NewStartGroup returns a group over batch with parallel batch slots (DefaultStartSlots if
// not positive).
func NewStartGroup(batch StartRunsHandler, parallel int) *StartGroup {
	if parallel <= 0 {
		parallel = DefaultStartSlots
	}
	return &StartGroup{batch: batch, parallel: parallel, timeout: 30 * time.Second}
}

// Handle starts the run, or returns run.ErrWorkflowNotFound, *run.InvalidWorkflowError,
// *run.InvalidInputError, *port.UnavailableError (the editor or the store could not answer) or
// *port.DispatchError. It waits for the answer even when ctx ends: the start may be stored by then.
func (g *StartGroup) Handle(ctx context.Context, cmd StartRun) (Started, error) {
	if err := checkKey(cmd.IdempotencyKey); err != nil {
		return Started{}, err
	}
	if !plainID(cmd.Workflow.ID) || !plainID(cmd.Workflow.Name) {
		return Started{}, run.ErrWorkflowNotFound // no workflow has such an id; the editor is not asked
	}
	p := &groupedStart{ctx: ctx, cmd: cmd, done: make(chan StartRunResult, 1)}
	g.mu.Lock()
	g.queue = append(g.queue, p)
	if g.busy < g.parallel {
		g.busy++
		go g.work()
	}
	g.mu.Unlock()
	r := <-p.done
	return r.Started, r.Err
}

// work stores batches of the queued starts until none is left.
func (g *StartGroup) work() {
	for {
		g.mu.Lock()
		n := min(len(g.queue), MaxStartRuns)
		if n == 0 {
			g.busy--
			g.mu.Unlock()
			return
		}
		batch := g.queue[:n:n]
		g.queue = append([]*groupedStart(nil), g.queue[n:]...)
		g.mu.Unlock()
		g.store(batch)
	}
}

// store runs one batch and answers its callers. The batch's context is its first caller's,
// without its cancellation (other callers' starts must not end with it), bounded in time.
func (g *StartGroup) store(batch []*groupedStart) {
	ctx, cancel := context.WithTimeout(context.WithoutCancel(batch[0].ctx), g.timeout)
	defer cancel()
	cmds := make([]StartRun, len(batch))
	for i, p := range batch {
		cmds[i] = p.cmd
	}
	results, err := g.handle(ctx, cmds)
	for i, p := range batch {
		if err != nil {
			p.done <- StartRunResult{Err: err}
			continue
		}
		p.done <- results[i]
	}
}

// handle runs the batch; a panic is the batch's error (its callers are answered, the process
// and the other batches go on).
func (g *StartGroup) handle(ctx context.Context, cmds []StartRun) (results []StartRunResult, err error) {
	defer func() {
		if v := recover(); v != nil {
			results, err = nil, &port.DispatchError{Message: "the runs could not be started; nothing was stored", Err: fmt.Errorf("panic: %v", v)}
		}
	}()
	return g.batch.Handle(ctx, cmds)
}
