package mcptools

import (
	"context"
	"encoding/json"
	"strings"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	api "svc.dev/clients/apiclient"
)

// Bounds of runs_wait: a tool call must end while the model's client still waits for it.
const (
	defaultWaitSeconds = 30
	maxWaitSeconds     = 120
)

// RunRef names a run.
type RunRef struct {
	RunID string `json:"run_id" jsonschema:"the run's id (run_...)"`
}

// RunsStartInput starts a run.
type RunsStartInput struct {
	WorkflowID     string `json:"workflow_id" jsonschema:"the workflow's id (wf_...)"`
	Input          any    `json:"input,omitempty" jsonschema:"the run input (any JSON; checked against trigger.manual's input_schema when it has one); templates read it as input"`
	IdempotencyKey string `json:"idempotency_key,omitempty" jsonschema:"the same key within 24 h returns the same run instead of starting another"`
}

// RunsListInput filters and pages runs.
type RunsListInput struct {
	WorkflowID string `json:"workflow_id,omitempty"`
	Status     string `json:"status,omitempty" jsonschema:"queued, running, waiting, completed, failed or cancelled"`
	After      string `json:"after,omitempty" jsonschema:"next_cursor of the previous page"`
	Limit      int    `json:"limit,omitempty" jsonschema:"page size, 1-500 (default 50)"`
}

// RunsListOutput is one page of runs, newest first.
type RunsListOutput struct {
	Runs       []api.Run `json:"runs"`
	NextCursor *string   `json:"next_cursor" jsonschema:"pass as after for the next page; null after the last"`
}

// RunsLogsInput pages a run's step attempts.
type RunsLogsInput struct {
	RunID string `json:"run_id" jsonschema:"the run's id (run_...)"`
	After string `json:"after,omitempty" jsonschema:"next_cursor of the previous call: only attempts that changed since"`
	Limit int    `json:"limit,omitempty" jsonschema:"page size, 1-1000 (default 100)"`
}

// boundedBytes bounds the items of one list tool's answer (their JSON): a model reads the
// answer whole, and the server that builds it (the gateway, over HTTP) is shared.
const boundedBytes = 256 << 10

// boundedPage reads one page with fetch(limit). A page whose items pass boundedBytes is read
// again with the limit cut to the leading items that fit (at least one), so the answer stays
// bounded and its next_cursor is the API's own: no cursor is made up, no item skipped.
func boundedPage(limit int, fetch func(limit int) (*api.Page, error)) (*api.Page, error) {
	p, err := fetch(limit)
	if err != nil {
		return nil, err
	}
	fit, total := 0, 0
	for _, it := range p.Items {
		total += len(it)
		if fit > 0 && total > boundedBytes {
			break
		}
		fit++
	}
	if fit == len(p.Items) {
		return p, nil
	}
	return fetch(fit)
}

// RunsLogsOutput is one page of attempts.
type RunsLogsOutput struct {
	Attempts   []api.Attempt `json:"attempts"`
	NextCursor string        `json:"next_cursor" jsonschema:"pass as after to read what changed since (also after the last page)"`
}

// RunsSignalInput sends a signal.
type RunsSignalInput struct {
	RunID   string `json:"run_id" jsonschema:"the run's id (run_...)"`
	Name    string `json:"name" jsonschema:"the signal name a wait block waits for (the run's waiting.signal)"`
	Payload any    `json:"payload,omitempty" jsonschema:"any JSON, the wait block's output.signal.payload"`
}

// RunsCancelOutput confirms a cancel.
type RunsCancelOutput struct {
	RunID  string `json:"runId"`
	Status string `json:"status"`
}

// RunsWaitInput waits for a run.
type RunsWaitInput struct {
	RunID          string `json:"run_id" jsonschema:"the run's id (run_...)"`
	TimeoutSeconds int    `json:"timeout_seconds,omitempty" jsonschema:"how long to wait, 1-120 (default 30)"`
}

// RunsWaitOutput is the run when the wait ended.
type RunsWaitOutput struct {
	Run      api.Run `json:"run"`
	Finished bool    `json:"finished" jsonschema:"completed, failed or cancelled"`
	Waiting  bool    `json:"waiting" jsonschema:"the run waits for a signal or a timer (see run.waiting)"`
	TimedOut bool    `json:"timed_out" jsonschema:"neither happened within timeout_seconds; call again to keep waiting (waiting is true as well when a sleep under way at the start outlasted it)"`
}

func (t *tools) addRunTools(s *mcp.Server) {
	mcp.AddTool(s, &mcp.Tool{
		Name: "runs_start", Title: "Start a run",
		Description: "Starts a run of a workflow with an input; answers at once with runId (the run goes on in the background: follow it with runs_wait and runs_logs). A workflow with validation errors is refused with error workflow_invalid and its validation_errors.",
	}, t.runsStart)
	mcp.AddTool(s, &mcp.Tool{
		Name: "runs_get", Title: "Get a run", Annotations: readOnly(),
		Description: "Returns a run: status (queued, running, waiting, completed, failed, cancelled), input, output (the sink blocks' outputs), error {block_id, message}, and waiting {block_id, kind, signal, until} while it waits.",
	}, t.runsGet)
	mcp.AddTool(s, &mcp.Tool{
		Name: "runs_list", Title: "List runs", Annotations: readOnly(),
		Description: "Lists runs, newest first, one page at a time; filter by workflow_id or status; page with after = next_cursor.",
	}, t.runsList)
	mcp.AddTool(s, &mcp.Tool{
		Name: "runs_logs", Title: "Read a run's logs", Annotations: readOnly(),
		Description: "Returns a run's step attempts (block_id, type, attempt, status, resolved input, output, error, durationMs), each listed once in its latest state, one page at a time. Pass next_cursor as after to get the next page, and later only the attempts that changed since; a page can be shorter than limit and not the last: the log is read to its end when a call returns no attempts.",
	}, t.runsLogs)
	mcp.AddTool(s, &mcp.Tool{
		Name: "runs_signal", Title: "Signal a run",
		Description: "Sends a named signal with an optional payload to a run. A wait block waiting for that name takes it (delivered true); otherwise it is kept for a later wait. A finished run answers run_finished.",
	}, t.runsSignal)
	mcp.AddTool(s, &mcp.Tool{
		Name: "runs_cancel", Title: "Cancel a run",
		Annotations: &mcp.ToolAnnotations{DestructiveHint: ptr(true), IdempotentHint: true},
		Description: "Cancels a run: its running step is cancelled and nothing else starts. A completed or failed run answers run_finished.",
	}, t.runsCancel)
	mcp.AddTool(s, &mcp.Tool{
		Name: "runs_wait", Title: "Wait for a run", Annotations: readOnly(),
		Description: "Waits until the run has finished or is waiting (for a signal or a timer), at most timeout_seconds (default 30, at most 120), and returns it. timed_out means neither happened yet. " +
			"A timer wait (waiting.kind sleep) that was already under way when the call began does not end it: call again after a sleep began to wait for what follows it. " +
			"It follows the run's event stream, so a long wait costs only a few requests of the caller's rate limit.",
	}, t.runsWait)
}

func (t *tools) runsStart(ctx context.Context, req *mcp.CallToolRequest, in RunsStartInput) (*mcp.CallToolResult, api.StartedRun, error) {
	if strings.TrimSpace(in.WorkflowID) == "" {
		return nil, api.StartedRun{}, invalidArgument("workflow_id is empty")
	}
	p, err := t.who(ctx, req.Extra)
	if err != nil {
		return nil, api.StartedRun{}, err
	}
	body := api.StartRunRequest{IdempotencyKey: in.IdempotencyKey}
	if in.Input != nil {
		if body.Input, err = json.Marshal(in.Input); err != nil {
			return nil, api.StartedRun{}, invalidArgument("input: " + err.Error())
		}
	}
	raw, err := p.Client.StartRun(ctx, p.Key, in.WorkflowID, body)
	if err != nil {
		return nil, api.StartedRun{}, toolError(err)
	}
	out, err := api.Decode[api.StartedRun](raw)
	return nil, out, toolErrorOrNil(err)
}

func (t *tools) getRun(ctx context.Context, p Principal, id string) (api.Run, error) {
	if strings.TrimSpace(id) == "" {
		return api.Run{}, invalidArgument("run_id is empty")
	}
	raw, err := p.Client.GetRun(ctx, p.Key, id, false)
	if err != nil {
		return api.Run{}, toolError(err)
	}
	r, err := api.Decode[api.Run](raw)
	return r, toolErrorOrNil(err)
}

func (t *tools) runsGet(ctx context.Context, req *mcp.CallToolRequest, in RunRef) (*mcp.CallToolResult, api.Run, error) {
	p, err := t.who(ctx, req.Extra)
	if err != nil {
		return nil, api.Run{}, err
	}
	r, err := t.getRun(ctx, p, in.RunID)
	return nil, r, err
}

func (t *tools) runsList(ctx context.Context, req *mcp.CallToolRequest, in RunsListInput) (*mcp.CallToolResult, RunsListOutput, error) {
	p, err := t.who(ctx, req.Extra)
	if err != nil {
		return nil, RunsListOutput{}, err
	}
	page, err := boundedPage(in.Limit, func(limit int) (*api.Page, error) {
		return p.Client.ListRunsPage(ctx, p.Key, in.WorkflowID, in.Status, in.After, limit)
	})
	if err != nil {
		return nil, RunsListOutput{}, toolError(err)
	}
	out := RunsListOutput{Runs: make([]api.Run, 0, len(page.Items)), NextCursor: page.NextCursor}
	for _, raw := range page.Items {
		r, err := api.Decode[api.Run](raw)
		if err != nil {
			return nil, RunsListOutput{}, toolError(err)
		}
		out.Runs = append(out.Runs, r)
	}
	return nil, out, nil
}

func (t *tools) runsLogs(ctx context.Context, req *mcp.CallToolRequest, in RunsLogsInput) (*mcp.CallToolResult, RunsLogsOutput, error) {
	if strings.TrimSpace(in.RunID) == "" {
		return nil, RunsLogsOutput{}, invalidArgument("run_id is empty")
	}
	p, err := t.who(ctx, req.Extra)
	if err != nil {
		return nil, RunsLogsOutput{}, err
	}
	page, err := boundedPage(in.Limit, func(limit int) (*api.Page, error) {
		return p.Client.Logs(ctx, p.Key, in.RunID, in.After, limit)
	})
	if err != nil {
		return nil, RunsLogsOutput{}, toolError(err)
	}
	out := RunsLogsOutput{Attempts: make([]api.Attempt, 0, len(page.Items)), NextCursor: in.After}
	if page.NextCursor != nil {
		out.NextCursor = *page.NextCursor
	}
	for _, raw := range page.Items {
		a, err := api.Decode[api.Attempt](raw)
		if err != nil {
			return nil, RunsLogsOutput{}, toolError(err)
		}
		out.Attempts = append(out.Attempts, a)
	}
	return nil, out, nil
}

func (t *tools) runsSignal(ctx context.Context, req *mcp.CallToolRequest, in RunsSignalInput) (*mcp.CallToolResult, api.SignalResult, error) {
	if strings.TrimSpace(in.RunID) == "" {
		return nil, api.SignalResult{}, invalidArgument("run_id is empty")
	}
	p, err := t.who(ctx, req.Extra)
	if err != nil {
		return nil, api.SignalResult{}, err
	}
	body := api.SignalRequest{Name: in.Name}
	if in.Payload != nil {
		if body.Payload, err = json.Marshal(in.Payload); err != nil {
			return nil, api.SignalResult{}, invalidArgument("payload: " + err.Error())
		}
	}
	raw, err := p.Client.SignalRun(ctx, p.Key, in.RunID, body)
	if err != nil {
		return nil, api.SignalResult{}, toolError(err)
	}
	out, err := api.Decode[api.SignalResult](raw)
	if err != nil {
		return nil, api.SignalResult{}, toolError(err)
	}
	return verbatim(raw), out, nil
}

func (t *tools) runsCancel(ctx context.Context, req *mcp.CallToolRequest, in RunRef) (*mcp.CallToolResult, RunsCancelOutput, error) {
	if strings.TrimSpace(in.RunID) == "" {
		return nil, RunsCancelOutput{}, invalidArgument("run_id is empty")
	}
	p, err := t.who(ctx, req.Extra)
	if err != nil {
		return nil, RunsCancelOutput{}, err
	}
	raw, err := p.Client.CancelRun(ctx, p.Key, in.RunID)
	if err != nil {
		return nil, RunsCancelOutput{}, toolError(err)
	}
	out, err := api.Decode[RunsCancelOutput](raw)
	return nil, out, toolErrorOrNil(err)
}

func (t *tools) runsWait(ctx context.Context, req *mcp.CallToolRequest, in RunsWaitInput) (*mcp.CallToolResult, RunsWaitOutput, error) {
	secs := in.TimeoutSeconds
	if secs == 0 {
		secs = defaultWaitSeconds
	}
	if secs < 1 || secs > maxWaitSeconds {
		return nil, RunsWaitOutput{}, invalidArgument("timeout_seconds must be between 1 and 120")
	}
	if strings.TrimSpace(in.RunID) == "" {
		return nil, RunsWaitOutput{}, invalidArgument("run_id is empty")
	}
	p, err := t.who(ctx, req.Extra)
	if err != nil {
		return nil, RunsWaitOutput{}, err
	}
	out, err := t.waitForRun(ctx, p, in.RunID, time.Duration(secs)*time.Second)
	return nil, out, err
}

func toolErrorOrNil(err error) error {
	if err == nil {
		return nil
	}
	return toolError(err)
}
