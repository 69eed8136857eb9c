package httpapi

import (
	"encoding/json"
	"fmt"
	"strconv"
	"strings"

	"svc.dev/libs/wire"
	"svc.dev/services/run-orchestrator/internal/domain/run"
)

// The aka tags name what other tools call a member: an unknown member gets the intended one as
// did_you_mean (web.Decode).
type startRunRequest struct {
	Input          json.RawMessage `json:"input" aka:"inputs,params,parameters,args,arguments,data,payload,body,variables,vars"`
	IdempotencyKey *string         `json:"idempotencyKey" aka:"idempotency,key,dedupKey,dedupeKey,requestId"`
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

// queueResponse says why a queued run waits: for a slot of its workflow's concurrency group,
// or for a worker (its job is in the queue).
type queueResponse struct {
	Reason  string `json:"reason"`
	Message string `json:"message"`
	// For concurrency_limit: the group's key, its limit and the runs of it in progress.
	Key        *string `json:"key,omitempty"`
	Limit      *int    `json:"limit,omitempty"`
	InProgress *int    `json:"in_progress,omitempty"`
	// For waiting_for_worker: the jobs queued ahead of the run's, and its organization's of them.
	Ahead    *int `json:"ahead,omitempty"`
	AheadOwn *int `json:"ahead_own,omitempty"`
}

func toQueueResponse(q *run.Queued) *queueResponse {
	if q == nil {
		return nil
	}
	out := &queueResponse{Reason: q.Reason, Message: q.Message()}
	if q.Reason == run.QueueReasonWorker {
		out.Ahead, out.AheadOwn = &q.Ahead, &q.AheadOwn
	} else {
		out.Key, out.Limit, out.InProgress = &q.Key, &q.Limit, &q.InProgress
	}
	return out
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
	Queue           *queueResponse    `json:"queue"`
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
	out.Queue = toQueueResponse(r.Queue)
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
	Name    string          `json:"name" aka:"signal,signalName,event,eventName,type,topic"`
	Payload json.RawMessage `json:"payload" aka:"data,body,value,input,message,content"`
}

// signalResponse is POST /api/runs/:id/signals's answer. A signal that no wait consumed is
// stored (a wait on its name that starts later takes it); the answer then says what the run
// waits for, so a caller that sent the wrong name sees it: waitingFor lists the signal names
// the run's waits wait for now (oldest first, empty when none), and did_you_mean the one the
// caller most likely meant when one is near the name sent (a misspelling; a different name may
// well be meant for a later wait, so none is guessed).
type signalResponse struct {
	SignalID   string   `json:"signalId"`
	Delivered  bool     `json:"delivered"`
	WaitingFor []string `json:"waitingFor,omitempty"`
	Message    string   `json:"message,omitempty"`
	DidYouMean string   `json:"did_you_mean,omitempty"`
}

func toSignalResponse(name string, res run.SignalResult) signalResponse {
	out := signalResponse{SignalID: res.ID, Delivered: res.Delivered}
	if res.Delivered {
		return out
	}
	out.WaitingFor = res.WaitingFor
	if out.WaitingFor == nil {
		out.WaitingFor = []string{}
	}
	switch {
	case len(res.WaitingFor) == 0:
		out.Message = fmt.Sprintf("signal %q is stored: the run does not wait for a signal now; a wait on %q that starts later consumes it", name, name)
	default:
		out.Message = fmt.Sprintf("signal %q is stored, but the run waits for %s; a wait on %q that starts later consumes it", name, quoteAll(res.WaitingFor), name)
		out.DidYouMean = wire.Nearest(name, res.WaitingFor)
	}
	return out
}

func quoteAll(names []string) string {
	q := make([]string, len(names))
	for i, n := range names {
		q[i] = strconv.Quote(n)
	}
	return strings.Join(q, ", ")
}
