// Package rpc is workflow-editor's inbound internal API (editor.v1), served with Connect.
package rpc

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"

	"connectrpc.com/connect"

	editorv1 "svc.dev/proto/gen/editor/v1"
	"svc.dev/proto/gen/editor/v1/editorv1connect"
	"svc.dev/services/workflow-editor/internal/app/query"
	"svc.dev/services/workflow-editor/internal/domain/workflow"
)

// EditorServer answers other services' questions about workflows.
type EditorServer struct {
	editorv1connect.UnimplementedEditorServiceHandler
	get query.GetWorkflowHandler
}

// NewEditorServer returns the server over the get-workflow query.
func NewEditorServer(get query.GetWorkflowHandler) *EditorServer {
	return &EditorServer{get: get}
}

// GetWorkflow returns a workflow snapshot, or not_found for a workflow the organization does
// not have (including every workflow of another organization).
func (s *EditorServer) GetWorkflow(ctx context.Context, req *connect.Request[editorv1.GetWorkflowRequest]) (*connect.Response[editorv1.GetWorkflowResponse], error) {
	q := query.GetWorkflow{OrganizationID: req.Msg.GetOrganizationId(), ID: req.Msg.GetId(), Name: req.Msg.GetName()}
	notFound := connect.NewResponse(&editorv1.GetWorkflowResponse{Result: &editorv1.GetWorkflowResponse_NotFound{NotFound: &editorv1.NotFound{}}})
	if q.OrganizationID == "" || (q.ID == "" && q.Name == "") {
		return notFound, nil
	}
	got, err := s.get.Handle(ctx, q)
	if errors.Is(err, workflow.ErrNotFound) {
		return notFound, nil
	}
	if err != nil {
		return nil, connect.NewError(connect.CodeUnavailable, fmt.Errorf("get workflow: %w", err))
	}
	def, err := json.Marshal(got.Definition())
	if err != nil {
		return nil, connect.NewError(connect.CodeInternal, err)
	}
	return connect.NewResponse(&editorv1.GetWorkflowResponse{Result: &editorv1.GetWorkflowResponse_Workflow{Workflow: toWorkflowMessage(got, def)}}), nil
}

func toWorkflowMessage(c workflow.Checked, def []byte) *editorv1.Workflow {
	msg := &editorv1.Workflow{
		Id: c.ID(), OrganizationId: c.OrganizationID(), Name: c.Name(), Version: c.Version(),
		DefinitionJson: string(def),
	}
	for _, e := range c.ValidationErrors {
		msg.ValidationErrors = append(msg.ValidationErrors, &editorv1.ValidationError{
			Code: string(e.Code), BlockId: e.BlockID, Message: e.Message, Pointer: e.Pointer, DidYouMean: e.DidYouMean,
		})
	}
	return msg
}
