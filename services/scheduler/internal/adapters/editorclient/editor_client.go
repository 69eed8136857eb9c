// Package editorclient asks workflow-editor's internal API (editor.v1) whether an organization
// has a workflow, over Connect through libs/httpclient: the caller's identity is propagated
// (signed) and a dead editor costs a fast failure through the breaker.
package editorclient

import (
	"context"
	"fmt"

	"connectrpc.com/connect"

	"svc.dev/libs/httpclient"
	editorv1 "svc.dev/proto/gen/editor/v1"
	"svc.dev/proto/gen/editor/v1/editorv1connect"
)

// EditorClient is the command.Workflows port over editor.v1.
type EditorClient struct {
	rpc editorv1connect.EditorServiceClient
}

// New returns a client over hc (built for the editor's base URL).
func New(hc *httpclient.Client, opts ...connect.ClientOption) *EditorClient {
	return &EditorClient{rpc: editorv1connect.NewEditorServiceClient(hc.HTTP(), hc.BaseURL(), opts...)}
}

// Exists reports whether the organization has the workflow.
func (c *EditorClient) Exists(ctx context.Context, organizationID, workflowID string) (bool, error) {
	resp, err := c.rpc.GetWorkflow(ctx, connect.NewRequest(&editorv1.GetWorkflowRequest{
		OrganizationId: organizationID, Key: &editorv1.GetWorkflowRequest_Id{Id: workflowID},
	}))
	if err != nil {
		return false, fmt.Errorf("editor GetWorkflow: %w", err)
	}
	return resp.Msg.GetWorkflow() != nil, nil
}
