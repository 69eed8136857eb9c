// Package orchestratorclient starts runs through run-orchestrator's internal API
// (orchestrator.v1 StartRun) over Connect, through libs/httpclient: calls are signed as this
// service, traced, and a dead orchestrator costs a fast failure through the breaker.
package orchestratorclient

import (
	"context"
	"fmt"

	"connectrpc.com/connect"

	"svc.dev/libs/httpclient"
	orchestratorv1 "svc.dev/proto/gen/orchestrator/v1"
	"svc.dev/proto/gen/orchestrator/v1/orchestratorv1connect"
	"svc.dev/services/webhook-ingress/internal/app/port"
)

// OrchestratorClient is the port.Dispatcher over orchestrator.v1.
type OrchestratorClient struct {
	rpc orchestratorv1connect.OrchestratorServiceClient
}

// New returns a client over hc (built for the orchestrator's base URL).
func New(hc *httpclient.Client, opts ...connect.ClientOption) *OrchestratorClient {
	return &OrchestratorClient{rpc: orchestratorv1connect.NewOrchestratorServiceClient(hc.HTTP(), hc.BaseURL(), opts...)}
}

// StartRun implements port.Dispatcher.
func (c *OrchestratorClient) StartRun(ctx context.Context, cmd port.StartRun) (port.Started, error) {
	resp, err := c.rpc.StartRun(ctx, connect.NewRequest(toStartRunRequest(cmd)))
	if err != nil {
		return port.Started{}, &port.UnavailableError{Peer: "run-orchestrator", Err: fmt.Errorf("StartRun: %w", err)}
	}
	switch res := resp.Msg.GetResult().(type) {
	case *orchestratorv1.StartRunResponse_Started:
		return port.Started{RunID: res.Started.GetRunId(), Deduplicated: res.Started.GetDeduplicated()}, nil
	case *orchestratorv1.StartRunResponse_NotFound:
		return port.Started{}, port.ErrWorkflowNotFound
	case *orchestratorv1.StartRunResponse_Rejected:
		return port.Started{}, &port.DispatchRejectedError{Code: res.Rejected.GetCode(), Message: res.Rejected.GetMessage()}
	default:
		return port.Started{}, &port.UnavailableError{Peer: "run-orchestrator", Err: fmt.Errorf("StartRun answered no result")}
	}
}

func toStartRunRequest(cmd port.StartRun) *orchestratorv1.StartRunRequest {
	return &orchestratorv1.StartRunRequest{
		OrganizationId: cmd.OrganizationID,
		Workflow:       &orchestratorv1.StartRunRequest_WorkflowName{WorkflowName: cmd.WorkflowName},
		InputJson:      string(cmd.Input),
		IdempotencyKey: cmd.IdempotencyKey,
		TriggerKind:    "webhook",
		TriggerJson:    string(cmd.Trigger),
	}
}
