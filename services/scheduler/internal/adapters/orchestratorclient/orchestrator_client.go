// Package orchestratorclient starts the runs of fires through run-orchestrator's internal API
// (orchestrator.v1 StartRuns, one call per batch of fires) over Connect, signed as the
// scheduler, each with its fire's idempotency key: a retried dispatch returns the first run
// instead of starting another.
package orchestratorclient

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"sync"

	"connectrpc.com/connect"

	"svc.dev/libs/httpclient"
	"svc.dev/libs/wire"
	orchestratorv1 "svc.dev/proto/gen/orchestrator/v1"
	"svc.dev/proto/gen/orchestrator/v1/orchestratorv1connect"
	"svc.dev/services/scheduler/internal/domain/schedule"
)

// singleConcurrency is how many StartRun calls a batch makes at once against an orchestrator
// that does not serve StartRuns yet (a rolling deploy).
const singleConcurrency = 16

// OrchestratorClient is the command.Dispatcher port over orchestrator.v1.
type OrchestratorClient struct {
	rpc orchestratorv1connect.OrchestratorServiceClient
}

// New returns a client over hc (built for the orchestrator's base URL).
func New(hc *httpclient.Client, opts ...connect.ClientOption) *OrchestratorClient {
	return &OrchestratorClient{rpc: orchestratorv1connect.NewOrchestratorServiceClient(hc.HTTP(), hc.BaseURL(), opts...)}
}

// triggerJSON is the run's trigger beside kind "schedule" ({kind:"schedule",
// scheduleId, cutoff}); the orchestrator adds kind.
type triggerJSON struct {
	ScheduleID string `json:"scheduleId"`
	Cutoff     string `json:"cutoff"`
}

// Dispatch starts the runs of fires with one StartRuns call and returns their outcomes in
// order. An orchestrator that does not serve StartRuns (older than this scheduler) gets one
// StartRun per fire instead.
func (c *OrchestratorClient) Dispatch(ctx context.Context, fires []schedule.Fire) ([]schedule.Outcome, error) {
	reqs := make([]*orchestratorv1.StartRunRequest, len(fires))
	for i, f := range fires {
		r, err := toStartRunRequest(f)
		if err != nil {
			return nil, err
		}
		reqs[i] = r
	}
	resp, err := c.rpc.StartRuns(ctx, connect.NewRequest(&orchestratorv1.StartRunsRequest{Requests: reqs}))
	if connect.CodeOf(err) == connect.CodeUnimplemented {
		return c.dispatchOneByOne(ctx, fires, reqs)
	}
	if err != nil {
		return nil, fmt.Errorf("orchestrator StartRuns: %w", err)
	}
	answers := resp.Msg.GetResponses()
	if len(answers) != len(fires) {
		return nil, fmt.Errorf("orchestrator StartRuns: %d answers for %d starts", len(answers), len(fires))
	}
	out := make([]schedule.Outcome, len(fires))
	for i, f := range fires {
		if out[i], err = toOutcome(f, answers[i]); err != nil {
			return nil, fmt.Errorf("orchestrator StartRuns: %w", err)
		}
	}
	return out, nil
}

// dispatchOneByOne starts each fire with StartRun, singleConcurrency at a time. Any failure
// fails the batch: every fire is retried, and the keys make the ones that started answer
// their run again.
func (c *OrchestratorClient) dispatchOneByOne(ctx context.Context, fires []schedule.Fire, reqs []*orchestratorv1.StartRunRequest) ([]schedule.Outcome, error) {
	out := make([]schedule.Outcome, len(fires))
	errs := make([]error, len(fires))
	sem := make(chan struct{}, singleConcurrency)
	var wg sync.WaitGroup
	for i := range fires {
		sem <- struct{}{}
		wg.Go(func() {
			defer func() { <-sem }()
			resp, err := c.rpc.StartRun(ctx, connect.NewRequest(reqs[i]))
			if err != nil {
				errs[i] = fmt.Errorf("orchestrator StartRun: %w", err)
				return
			}
			out[i], errs[i] = toOutcome(fires[i], resp.Msg)
		})
	}
	wg.Wait()
	if err := errors.Join(errs...); err != nil {
		return nil, err
	}
	return out, nil
}

// toStartRunRequest is the start of a fire's run.
func toStartRunRequest(f schedule.Fire) (*orchestratorv1.StartRunRequest, error) {
	trigger, err := json.Marshal(triggerJSON{ScheduleID: f.ScheduleID, Cutoff: wire.FormatTime(f.Cutoff)})
	if err != nil {
		return nil, err
	}
	req := &orchestratorv1.StartRunRequest{
		OrganizationId: f.OrganizationID,
		Workflow:       &orchestratorv1.StartRunRequest_WorkflowId{WorkflowId: f.WorkflowID},
		IdempotencyKey: f.IdempotencyKey(),
		TriggerKind:    "schedule",
		TriggerJson:    string(trigger),
	}
	if len(f.Input) > 0 && string(f.Input) != "null" {
		req.InputJson = string(f.Input)
	}
	return req, nil
}

// toOutcome is the fire's outcome for the orchestrator's answer.
func toOutcome(f schedule.Fire, resp *orchestratorv1.StartRunResponse) (schedule.Outcome, error) {
	switch r := resp.GetResult().(type) {
	case *orchestratorv1.StartRunResponse_Started:
		if r.Started.GetRunId() == "" {
			return schedule.Outcome{}, errors.New("an answer without a run id")
		}
		return schedule.Outcome{Fire: f, RunID: r.Started.GetRunId()}, nil
	case *orchestratorv1.StartRunResponse_NotFound:
		return schedule.Outcome{Fire: f, Code: schedule.CodeWorkflowNotFound, Message: "the workflow no longer exists; the schedule is disabled"}, nil
	case *orchestratorv1.StartRunResponse_Rejected:
		code := schedule.CodeWorkflowInvalid
		if r.Rejected.GetCode() == "invalid_body" {
			code = schedule.CodeInvalidInput
		}
		return schedule.Outcome{Fire: f, Code: code, Message: r.Rejected.GetMessage()}, nil
	default:
		return schedule.Outcome{}, errors.New("an answer without a result")
	}
}
