package http

import (
	"encoding/json"

	"svc.dev/libs/wire"
	"svc.dev/services/run-orchestrator/internal/domain/run"
)

type startRunRequest struct {
	Input          json.RawMessage `json:"input"`
	IdempotencyKey *string         `json:"idempotencyKey"`
}

type startRunResponse struct {
	RunID string `json:"runId"`
	Spec  string `json:"spec"`
}

type waitingResponse struct {
	BlockID string     `json:"block_id"`
	Kind    string     `json:"kind"`
	Until   *wire.Time `json:"until,omitempty"`
	Signal  string     `json:"signal,omitempty"`
}

type workflowResponse struct {
	ID         string          `json:"id"`
	Version    int64           `json:"version"`
	Definition json.RawMessage `json:"definition"`
}

type runResponse struct {
	RunID           string            `json:"runId"`
	WorkflowID      string            `json:"workflowId"`
	WorkflowVersion int64             `json:"workflowVersion"`
	Spec            string            `json:"spec"`
	Status          string            `json:"status"`
	Input           json.RawMessage   `json:"input"`
	Output          json.RawMessage   `json:"output"`
	Error           json.RawMessage   `json:"error"`
	Trigger         json.RawMessage   `json:"trigger"`
	Waiting         *waitingResponse  `json:"waiting"`
	CreatedAt       wire.Time         `json:"createdAt"`
	StartedAt       wire.Time         `json:"startedAt"`
	FinishedAt      wire.Time         `json:"finishedAt"`
	Workflow        *workflowResponse `json:"workflow,omitempty"`
}

func orNull(raw json.RawMessage) json.RawMessage {
	if len(raw) == 0 {
		return json.RawMessage("null")
	}
	return raw
}

func toRunResponse(r run.Record, withWorkflow bool) runResponse {
	out := runResponse{
		RunID: r.ID, WorkflowID: r.WorkflowID, WorkflowVersion: r.WorkflowVersion, Spec: run.Spec, Status: string(r.Status),
		Input: orNull(r.Input), Output: orNull(r.Output), Error: orNull(r.Error), Trigger: orNull(r.Trigger),
		CreatedAt: wire.NewTime(r.CreatedAt), StartedAt: wire.NewTime(r.StartedAt), FinishedAt: wire.NewTime(r.FinishedAt),
	}
	if r.Waiting != nil {
		w := &waitingResponse{BlockID: r.Waiting.BlockID, Kind: r.Waiting.Kind, Signal: r.Waiting.Signal}
		if !r.Waiting.Until.IsZero() {
			t := wire.NewTime(r.Waiting.Until)
			w.Until = &t
		}
		out.Waiting = w
	}
	if withWorkflow {
		out.Workflow = &workflowResponse{ID: r.WorkflowID, Version: r.WorkflowVersion, Definition: orNull(r.Definition)}
	}
	return out
}

type attemptResponse struct {
	ID         string          `json:"id"`
	BlockID    string          `json:"block_id"`
	Type       string          `json:"type"`
	Attempt    int             `json:"attempt"`
	Status     string          `json:"status"`
	StartedAt  wire.Time       `json:"startedAt"`
	FinishedAt wire.Time       `json:"finishedAt"`
	DurationMS *int64          `json:"durationMs"`
	Input      json.RawMessage `json:"input"`
	Output     json.RawMessage `json:"output"`
	Error      json.RawMessage `json:"error"`
}

func toAttemptResponse(a run.Attempt) attemptResponse {
	out := attemptResponse{
		ID: a.ID, BlockID: a.BlockID, Type: a.Type, Attempt: a.Attempt, Status: a.Status,
		StartedAt: wire.NewTime(a.StartedAt), FinishedAt: wire.NewTime(a.FinishedAt),
		Input: orNull(a.Input), Output: orNull(a.Output), Error: orNull(a.Error),
	}
	if !a.FinishedAt.IsZero() {
		d := a.FinishedAt.Sub(a.StartedAt).Milliseconds()
		out.DurationMS = &d
	}
	return out
}

type signalRequest struct {
	Name    string          `json:"name"`
	Payload json.RawMessage `json:"payload"`
}
