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
	"svc.dev/services/run-orchestrator/internal/app/command"
	"svc.dev/services/run-orchestrator/internal/app/port"
	"svc.dev/services/run-orchestrator/internal/domain/run"
)

// OrchestratorServer starts runs for the scheduler and webhook-ingress.
type OrchestratorServer struct {
	orchestratorv1connect.UnimplementedOrchestratorServiceHandler
	start *command.StartGroup
	batch command.StartRunsHandler
}

// NewOrchestratorServer returns the server over the start-run use cases.
func NewOrchestratorServer(start *command.StartGroup, batch command.StartRunsHandler) *OrchestratorServer {
	return &OrchestratorServer{start: start, batch: batch}
}

// StartRun starts a run; answers the caller acts on are in the response, failures are
// Connect errors (nothing was stored).
func (s *OrchestratorServer) StartRun(ctx context.Context, req *connect.Request[orchestratorv1.StartRunRequest]) (*connect.Response[orchestratorv1.StartRunResponse], error) {
	cmd, answer := toStartRun(req.Msg)
	if answer != nil {
		return connect.NewResponse(answer), nil
	}
	started, err := s.start.Handle(ctx, cmd)
	answer, err = toStartRunResponse(started, err)
	if err != nil {
		return nil, connect.NewError(connect.CodeUnavailable, err)
	}
	return connect.NewResponse(answer), nil
}

// StartRuns starts a batch of runs and answers each item as StartRun would, in order. A Connect
// error means nothing of the batch was stored: InvalidArgument for a batch over
// command.MaxStartRuns, Unavailable when the editor or the store could not answer.
func (s *OrchestratorServer) StartRuns(ctx context.Context, req *connect.Request[orchestratorv1.StartRunsRequest]) (*connect.Response[orchestratorv1.StartRunsResponse], error) {
	items := req.Msg.GetRequests()
	if len(items) > command.MaxStartRuns {
		return nil, connect.NewError(connect.CodeInvalidArgument, &command.TooManyStartsError{N: len(items)})
	}
	answers := make([]*orchestratorv1.StartRunResponse, len(items))
	var (
		cmds []command.StartRun
		at   []int // answers index of each cmd
	)
	for i, m := range items {
		cmd, answer := toStartRun(m)
		if answer != nil {
			answers[i] = answer
			continue
		}
		cmds, at = append(cmds, cmd), append(at, i)
	}
	results, err := s.batch.Handle(ctx, cmds)
	var tm *command.TooManyStartsError
	switch {
	case errors.As(err, &tm):
		return nil, connect.NewError(connect.CodeInvalidArgument, err)
	case err != nil:
		return nil, connect.NewError(connect.CodeUnavailable, err)
	}
	for j, r := range results {
		answer, err := toStartRunResponse(r.Started, r.Err)
		if err != nil {
			// The use case answers items only with outcomes, so this is a bug; it must not
			// pass for a start, and a retry with the same keys answers any run stored.
			return nil, connect.NewError(connect.CodeInternal, err)
		}
		answers[at[j]] = answer
	}
	return connect.NewResponse(&orchestratorv1.StartRunsResponse{Responses: answers}), nil
}

// toStartRun converts a request into the use case's command, or into the answer when the
// request alone decides it (no organization or workflow: not found; a bad trigger or input:
// rejected).
func toStartRun(m *orchestratorv1.StartRunRequest) (command.StartRun, *orchestratorv1.StartRunResponse) {
	if m.GetOrganizationId() == "" || (m.GetWorkflowId() == "" && m.GetWorkflowName() == "") {
		return command.StartRun{}, notFound()
	}
	trigger, err := toTrigger(m.GetTriggerKind(), m.GetTriggerJson())
	if err != nil {
		return command.StartRun{}, rejected("invalid_body", err.Error())
	}
	var input json.RawMessage
	if m.GetInputJson() != "" {
		if !json.Valid([]byte(m.GetInputJson())) {
			return command.StartRun{}, rejected("invalid_body", "input_json is not valid JSON")
		}
		input = json.RawMessage(m.GetInputJson())
	}
	return command.StartRun{
		OrganizationID: m.GetOrganizationId(),
		Workflow:       port.WorkflowRef{ID: m.GetWorkflowId(), Name: m.GetWorkflowName()},
		Input:          input, IdempotencyKey: m.GetIdempotencyKey(), Trigger: trigger,
	}, nil
}

// toStartRunResponse is the answer for a start's outcome; an error that is no outcome (the run
// could not be dispatched) is returned as it is.
func toStartRunResponse(started command.Started, err error) (*orchestratorv1.StartRunResponse, error) {
	var (
		we *run.InvalidWorkflowError
		ie *run.InvalidInputError
	)
	switch {
	case err == nil:
		return &orchestratorv1.StartRunResponse{Result: &orchestratorv1.StartRunResponse_Started{
			Started: &orchestratorv1.Started{RunId: started.RunID, Deduplicated: started.Deduplicated}}}, nil
	case errors.Is(err, run.ErrWorkflowNotFound):
		return notFound(), nil
	case errors.As(err, &we):
		msg := we.Error()
		if len(we.Errors) > 0 {
			msg += ": " + we.Errors[0].Message
		}
		return rejected("workflow_invalid", msg), nil
	case errors.As(err, &ie):
		msg := ie.Error()
		if len(ie.Issues) > 0 {
			msg += ": " + ie.Issues[0].Path + ": " + ie.Issues[0].Message
		}
		return rejected("invalid_body", msg), nil
	default:
		return nil, err
	}
}

func notFound() *orchestratorv1.StartRunResponse {
	return &orchestratorv1.StartRunResponse{Result: &orchestratorv1.StartRunResponse_NotFound{NotFound: &orchestratorv1.NotFound{}}}
}

func rejected(code, msg string) *orchestratorv1.StartRunResponse {
	return &orchestratorv1.StartRunResponse{Result: &orchestratorv1.StartRunResponse_Rejected{
		Rejected: &orchestratorv1.Rejected{Code: code, Message: msg}}}
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
