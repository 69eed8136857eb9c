// Package editorclient reads workflow snapshots from workflow-editor's internal API (editor.v1)
// over Connect, through libs/httpclient: the caller's identity is propagated (signed) and a
// dead editor costs a fast failure through the breaker.
package editorclient

import (
	"context"
	"fmt"

	"connectrpc.com/connect"

	"svc.dev/libs/httpclient"
	editorv1 "svc.dev/proto/gen/editor/v1"
	"svc.dev/proto/gen/editor/v1/editorv1connect"
	"svc.dev/services/run-orchestrator/internal/app/port"
	"svc.dev/services/run-orchestrator/internal/domain/run"
)

// EditorClient is the port.WorkflowCatalog over editor.v1.
type EditorClient struct {
	rpc editorv1connect.EditorServiceClient
}

// New returns a client over hc (built for the editor's base URL).
func New(hc *httpclient.Client, opts ...connect.ClientOption) *EditorClient {
	return &EditorClient{rpc: editorv1connect.NewEditorServiceClient(hc.HTTP(), hc.BaseURL(), opts...)}
}

// Workflow returns the current snapshot of the workflow named by ref in org, or
// run.ErrWorkflowNotFound.
func (c *EditorClient) Workflow(ctx context.Context, org string, ref port.WorkflowRef) (port.Snapshot, error) {
	req := &editorv1.GetWorkflowRequest{OrganizationId: org}
	if ref.ID != "" {
		req.Key = &editorv1.GetWorkflowRequest_Id{Id: ref.ID}
	} else {
		req.Key = &editorv1.GetWorkflowRequest_Name{Name: ref.Name}
	}
	resp, err := c.rpc.GetWorkflow(ctx, connect.NewRequest(req))
	if err != nil {
		return port.Snapshot{}, fmt.Errorf("editor GetWorkflow: %w", err)
	}
	wf := resp.Msg.GetWorkflow()
	if wf == nil {
		return port.Snapshot{}, run.ErrWorkflowNotFound
	}
	return toSnapshot(wf), nil
}

func toSnapshot(wf *editorv1.Workflow) port.Snapshot {
	s := port.Snapshot{ID: wf.GetId(), Version: wf.GetVersion(), Definition: []byte(wf.GetDefinitionJson())}
	for _, e := range wf.GetValidationErrors() {
		s.ValidationErrors = append(s.ValidationErrors, run.ValidationError{
			Code: e.GetCode(), BlockID: e.GetBlockId(), Message: e.GetMessage(), Pointer: e.GetPointer(), DidYouMean: e.GetDidYouMean(),
		})
	}
	return s
}
