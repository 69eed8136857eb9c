// Package orchestratorclient starts the runs of fires through run-orchestrator's internal API
// (orchestrator.v1 StartRun) over Connect, signed as the scheduler, with the fire's idempotency
// key: a retried dispatch returns the first run instead of starting another.
package orchestratorclient

import (
	"context"
	"encoding/json"
	"fmt"

	"connectrpc.com/connect"

	"svc.dev/libs/httpclient"
	"svc.dev/libs/wire"
	orchestratorv1 "svc.dev/proto/gen/orchestrator/v1"
	"svc.dev/proto/gen/orchestrator/v1/orchestratorv1connect"
	"svc.dev/services/scheduler/internal/domain/schedule"
)

// OrchestratorClient is the command.Dispatcher port over orchestrator.v1.
type OrchestratorClient struct {
	rpc orchestratorv1connect.OrchestratorServiceClient
}

// New returns a client over hc (built for the orchestrator's base URL).
func New(hc *httpclient.Client, opts ...connect.ClientOption) *OrchestratorClient {
	return &OrchestratorClient{rpc: orchestratorv1connect.NewOrchestratorServiceClient(hc.HTTP(), hc.BaseURL(), opts...)}
}

// triggerJSON is the run's trigger beside kind "schedule" (contract §3: {kind:"schedule",
// scheduleId, cutoff}); the orchestrator adds kind.
type triggerJSON struct {
	ScheduleID string `json:"scheduleId"`
	Cutoff     string `json:"cutoff"`
}

// Dispatch starts the fire's run.
func (c *OrchestratorClient) Dispatch(ctx context.Context, f schedule.Fire) (schedule.Outcome, error) {
	trigger, err := json.Marshal(triggerJSON{ScheduleID: f.ScheduleID, Cutoff: wire.FormatTime(f.Cutoff)})
	if err != nil {
		return schedule.Outcome{}, err
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
	resp, err := c.rpc.StartRun(ctx, connect.NewRequest(req))
	if err != nil {
		return schedule.Outcome{}, fmt.Errorf("orchestrator StartRun: %w", err)
	}
	switch r := resp.Msg.GetResult().(type) {
	case *orchestratorv1.StartRunResponse_Started:
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
		return schedule.Outcome{}, fmt.Errorf("orchestrator StartRun: an answer without a result")
	}
}
