package apiclient

import (
	"encoding/json"
	"fmt"
)

// The public API's resources as typed values, for callers that read more
// than a few fields (the MCP tools build their output schemas from them). Members whose
// content is any JSON (params, input, output, payloads, schemas) are `any`: they go through
// as the API sent them. The `jsonschema` tags describe each member to a model.

// Decode reads an API answer into a typed value.
func Decode[T any](raw json.RawMessage) (T, error) {
	var v T
	if err := json.Unmarshal(raw, &v); err != nil {
		return v, fmt.Errorf("decode %T: %w", v, err)
	}
	return v, nil
}

// Connector is one entry of the connector catalog.
type Connector struct {
	Type         string       `json:"type" jsonschema:"the block type to use in an add operation, e.g. http.request"`
	Category     string       `json:"category" jsonschema:"trigger, action, logic or wait"`
	Title        string       `json:"title"`
	Description  string       `json:"description"`
	Params       any          `json:"params,omitempty" jsonschema:"JSON Schema of the block's params"`
	OutputSchema any          `json:"output_schema,omitempty" jsonschema:"JSON Schema of the block's output, readable downstream as steps.<block_id>.output"`
	RetryPolicy  *RetryPolicy `json:"retry_policy,omitempty"`
	TimeoutMs    int64        `json:"timeout_ms,omitempty"`
}

// RetryPolicy is how a connector's failed attempts are retried.
type RetryPolicy struct {
	MaxAttempts        int     `json:"max_attempts"`
	InitialIntervalMs  int64   `json:"initial_interval_ms"`
	BackoffCoefficient float64 `json:"backoff_coefficient"`
	MaxIntervalMs      int64   `json:"max_interval_ms"`
}

// Block is one node of a definition.
type Block struct {
	BlockID string         `json:"block_id"`
	Type    string         `json:"type"`
	Params  map[string]any `json:"params,omitempty"`
}

// Edge connects two blocks; Branch is "true" or "false" on a condition's edges.
type Edge struct {
	BlockID       string `json:"block_id"`
	TargetBlockID string `json:"target_block_id"`
	Branch        string `json:"branch,omitempty"`
}

// Definition is a workflow's graph.
type Definition struct {
	Blocks []Block `json:"blocks"`
	Edges  []Edge  `json:"edges"`
}

// Hint is the machine-readable help of a skipped operation.
type Hint struct {
	DidYouMean any    `json:"did_you_mean,omitempty" jsonschema:"the closest valid value: use it as it is"`
	Allowed    []any  `json:"allowed,omitempty" jsonschema:"the valid values"`
	Pointer    string `json:"pointer,omitempty" jsonschema:"JSON Pointer into the operation"`
}

// SkippedItem is an operation the editor did not apply.
type SkippedItem struct {
	OperationIndex int    `json:"operation_index"`
	OperationType  string `json:"operation_type"`
	BlockID        string `json:"block_id,omitempty"`
	ReasonCode     string `json:"reason_code"`
	Reason         string `json:"reason"`
	Hint           *Hint  `json:"hint,omitempty"`
	// Problems is every problem of the operation, this item's own first, when it has more
	// than one: repair them all in one round trip.
	Problems []Problem `json:"problems,omitempty" jsonschema:"every problem of the operation when it has more than one (this item's own first): repair them all before sending it again"`
}

// Problem is one of the problems of a skipped operation.
type Problem struct {
	ReasonCode string `json:"reason_code"`
	Reason     string `json:"reason"`
	Hint       *Hint  `json:"hint,omitempty"`
}

// ValidationError is a reason a saved workflow cannot run yet.
type ValidationError struct {
	Code       string `json:"code"`
	BlockID    string `json:"block_id,omitempty"`
	Message    string `json:"message"`
	Pointer    string `json:"pointer,omitempty"`
	DidYouMean any    `json:"did_you_mean,omitempty" jsonschema:"the likely intended value"`
	// NoIncomingEdge lists, for no_trigger, the blocks no edge leads into.
	NoIncomingEdge []string `json:"no_incoming_edge,omitempty" jsonschema:"for no_trigger: the blocks no edge leads into, where the trigger connects"`
}

// WorkflowSummary is a workflow as lists show it: without its definition.
type WorkflowSummary struct {
	ID          string `json:"id"`
	Name        string `json:"name"`
	Description string `json:"description"`
	Version     int64  `json:"version"`
	CreatedAt   string `json:"createdAt"`
	UpdatedAt   string `json:"updatedAt"`
}

// Workflow is a workflow with its definition and what keeps it from running.
type Workflow struct {
	ID               string            `json:"id"`
	Name             string            `json:"name"`
	Description      string            `json:"description"`
	Version          int64             `json:"version"`
	Definition       *Definition       `json:"definition,omitempty"`
	ValidationErrors []ValidationError `json:"validation_errors,omitempty"`
	CreatedAt        string            `json:"createdAt"`
	UpdatedAt        string            `json:"updatedAt"`
}

// CreatedWorkflow is the answer to a workflow's creation.
type CreatedWorkflow struct {
	Workflow
	SkippedItems []SkippedItem `json:"skipped_items" jsonschema:"operations of the given definition that were not applied"`
}

// OpsResult is the answer to a batch of operations.
type OpsResult struct {
	OK               bool              `json:"ok"`
	Version          int64             `json:"version"`
	ValidationErrors []ValidationError `json:"validation_errors"`
	SkippedItems     []SkippedItem     `json:"skipped_items"`
	Summary          string            `json:"summary,omitempty"`
}

// RunError is why a run failed.
type RunError struct {
	BlockID string `json:"block_id,omitempty"`
	Message string `json:"message"`
}

// Waiting is what a waiting run waits for.
type Waiting struct {
	BlockID string `json:"block_id"`
	Kind    string `json:"kind" jsonschema:"sleep or signal"`
	Until   string `json:"until,omitempty"`
	Signal  string `json:"signal,omitempty" jsonschema:"the signal name to send with runs_signal"`
}

// Run is a run of a workflow.
type Run struct {
	RunID           string    `json:"runId"`
	WorkflowID      string    `json:"workflowId"`
	WorkflowVersion int64     `json:"workflowVersion"`
	Status          string    `json:"status" jsonschema:"queued, running, waiting, completed, failed or cancelled"`
	Input           any       `json:"input,omitempty" jsonschema:"the caller's input"`
	Output          any       `json:"output,omitempty" jsonschema:"{<block_id>: output} of the sink blocks that ran"`
	Error           *RunError `json:"error,omitempty"`
	Trigger         any       `json:"trigger,omitempty" jsonschema:"what started it: {kind: manual, schedule or webhook, ...}"`
	Waiting         *Waiting  `json:"waiting,omitempty"`
	CreatedAt       string    `json:"createdAt"`
	StartedAt       string    `json:"startedAt,omitempty"`
	FinishedAt      string    `json:"finishedAt,omitempty"`
}

// Terminal reports whether the run is over.
func (r Run) Terminal() bool {
	return r.Status == "completed" || r.Status == "failed" || r.Status == "cancelled"
}

// AttemptError is why a step attempt failed.
type AttemptError struct {
	Message string `json:"message"`
	Code    string `json:"code,omitempty"`
}

// Attempt is one step attempt of a run's logs.
type Attempt struct {
	ID         string        `json:"id"`
	BlockID    string        `json:"block_id"`
	Type       string        `json:"type"`
	Attempt    int           `json:"attempt"`
	Status     string        `json:"status" jsonschema:"running, succeeded, failed, cancelled or lost"`
	StartedAt  string        `json:"startedAt,omitempty"`
	FinishedAt string        `json:"finishedAt,omitempty"`
	DurationMs *int64        `json:"durationMs,omitempty"`
	Input      any           `json:"input,omitempty" jsonschema:"the resolved params"`
	Output     any           `json:"output,omitempty" jsonschema:"the step's output"`
	Error      *AttemptError `json:"error,omitempty"`
}

// Schedule fires runs of a workflow on a cron.
type Schedule struct {
	ID          string `json:"id"`
	WorkflowID  string `json:"workflowId"`
	Cron        string `json:"cron"`
	Timezone    string `json:"timezone"`
	Input       any    `json:"input,omitempty" jsonschema:"the input of every run it starts"`
	Enabled     bool   `json:"enabled"`
	LastFiredAt string `json:"lastFiredAt,omitempty"`
	NextFireAt  string `json:"nextFireAt,omitempty"`
	CreatedAt   string `json:"createdAt"`
	UpdatedAt   string `json:"updatedAt"`
}

// StartedRun is the answer to a run start.
type StartedRun struct {
	RunID string `json:"runId"`
	Spec  string `json:"spec"`
}

// SignalResult is the answer to a signal.
type SignalResult struct {
	SignalID  string `json:"signalId"`
	Delivered bool   `json:"delivered" jsonschema:"whether a wait of the run took it now; otherwise it is stored for a later wait"`
	// WaitingFor, Message and DidYouMean come with a signal no wait took (delivered false).
	WaitingFor []string `json:"waitingFor,omitempty" jsonschema:"the signal names the run waits for now"`
	Message    string   `json:"message,omitempty"`
	DidYouMean string   `json:"did_you_mean,omitempty" jsonschema:"the signal name the run waits for that was likely meant"`
}
