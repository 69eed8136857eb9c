// Package rpc is run-orchestrator's inbound internal API (orchestrator.v1), served with Connect.
package rpc

import (
	"context"
	"encoding/json"
	"errors"
	"strings"

	"connectrpc.com/connect"

	orchestratorv1 "svc.dev/proto/gen/orchestrator/v1"
	"svc.dev/proto/gen/orchestrator/v1/orchestratorv1connect"
	"svc.dev/services/run-orchestrator/internal/app"
	"svc.dev/services/run-orchestrator/internal/domain/run"
)

// OrchestratorServer starts runs for the scheduler and webhook-ingress.
type OrchestratorServer struct {
	orchestratorv1connect.UnimplementedOrchestratorServiceHandler
	start app.StartRunHandler
}

// NewOrchestratorServer returns the server over the start-run use case.
func NewOrchestratorServer(start app.StartRunHandler) *OrchestratorServer {
	return &OrchestratorServer{start: start}
}

// StartRun starts a run; answers the caller acts on are in the response, failures are
// Connect errors (nothing was stored).
func (s *OrchestratorServer) StartRun(ctx context.Context, req *connect.Request[orchestratorv1.StartRunRequest]) (*connect.Response[orchestratorv1.StartRunResponse], error) {
	m := req.Msg
	notFound := connect.NewResponse(&orchestratorv1.StartRunResponse{Result: &orchestratorv1.StartRunResponse_NotFound{NotFound: &orchestratorv1.NotFound{}}})
	if m.GetOrganizationId() == "" || (m.GetWorkflowId() == "" && m.GetWorkflowName() == "") {
		return notFound, nil
	}
	trigger, err := toTrigger(m.GetTriggerKind(), m.GetTriggerJson())
	if err != nil {
		return rejected("invalid_body", err.Error()), nil
	}
	var input json.RawMessage
	if m.GetInputJson() != "" {
		if !json.Valid([]byte(m.GetInputJson())) {
			return rejected("invalid_body", "input_json is not valid JSON"), nil
		}
		input = json.RawMessage(m.GetInputJson())
	}
	started, err := s.start.Handle(ctx, app.StartRun{
		OrganizationID: m.GetOrganizationId(),
		Workflow:       app.WorkflowRef{ID: m.GetWorkflowId(), Name: m.GetWorkflowName()},
		Input:          input, IdempotencyKey: m.GetIdempotencyKey(), Trigger: trigger,
	})
	var (
		we *run.InvalidWorkflowError
		ie *run.InvalidInputError
	)
	switch {
	case err == nil:
		return connect.NewResponse(&orchestratorv1.StartRunResponse{Result: &orchestratorv1.StartRunResponse_Started{
			Started: &orchestratorv1.Started{RunId: started.RunID, Deduplicated: started.Deduplicated}}}), nil
	case errors.Is(err, run.ErrWorkflowNotFound):
		return notFound, nil
	case errors.As(err, &we):
		return rejected("workflow_invalid", we.Error()), nil
	case errors.As(err, &ie):
		msg := ie.Error()
		if len(ie.Issues) > 0 {
			msg += ": " + ie.Issues[0].Path + ": " + ie.Issues[0].Message
		}
		return rejected("invalid_body", msg), nil
	default:
		return nil, connect.NewError(connect.CodeUnavailable, err)
	}
}

func rejected(code, msg string) *connect.Response[orchestratorv1.StartRunResponse] {
	return connect.NewResponse(&orchestratorv1.StartRunResponse{Result: &orchestratorv1.StartRunResponse_Rejected{
		Rejected: &orchestratorv1.Rejected{Code: code, Message: msg}}})
}

// toTrigger builds the run's trigger object {kind, ...extra}.
func toTrigger(kind, extra string) (json.RawMessage, error) {
	if kind == "" {
		kind = "manual"
	}
	switch kind {
	case "manual", "schedule", "webhook":
	default:
		return nil, errors.New("trigger_kind must be manual, schedule or webhook")
	}
	t := map[string]any{}
	if strings.TrimSpace(extra) != "" {
		if err := json.Unmarshal([]byte(extra), &t); err != nil {
			return nil, errors.New("trigger_json must be a JSON object")
		}
	}
	t["kind"] = kind
	return json.Marshal(t)
}
