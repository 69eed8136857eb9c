package mcptools

import (
	"context"
	"encoding/json"
	"strings"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	api "svc.dev/clients/apiclient"
)

// WorkflowRef names a workflow.
type WorkflowRef struct {
	WorkflowID string `json:"workflow_id" jsonschema:"the workflow's id (wf_...)"`
}

// WorkflowsListInput pages workflows.
type WorkflowsListInput struct {
	After string `json:"after,omitempty" jsonschema:"next_cursor of the previous page"`
	Limit int    `json:"limit,omitempty" jsonschema:"page size, 1-500 (default 50)"`
}

// WorkflowsListOutput is one page of the organization's workflows, newest first, without
// definitions.
type WorkflowsListOutput struct {
	Workflows  []api.WorkflowSummary `json:"workflows"`
	NextCursor *string               `json:"next_cursor" jsonschema:"pass as after for the next page; null after the last"`
}

// WorkflowsCreateInput is a new workflow.
type WorkflowsCreateInput struct {
	Name        string         `json:"name" jsonschema:"1-200 characters, unique in the organization"`
	Description string         `json:"description,omitempty"`
	Definition  map[string]any `json:"definition,omitempty" jsonschema:"optional graph {blocks:[{block_id, type, params}], edges:[{block_id, target_block_id, branch?}]}, applied as a batch of add and connect operations: what is not applied comes back in skipped_items"`
}

// WorkflowsPatchInput is a batch of edit operations.
type WorkflowsPatchInput struct {
	WorkflowID string           `json:"workflow_id" jsonschema:"the workflow's id (wf_...)"`
	Ops        []map[string]any `json:"ops" jsonschema:"operations applied in order, each on its own: {operation_type:\"add\", block_id, type, params?} | {operation_type:\"update\", block_id, params (merged; null removes a key)} | {operation_type:\"remove\", block_id} | {operation_type:\"connect\", block_id, target_block_id, branch? (\"true\"/\"false\" from a condition)} | {operation_type:\"disconnect\", block_id, target_block_id}"`
	IfMatch    int64            `json:"if_match,omitempty" jsonschema:"apply only if the workflow is still at this version (else error version_mismatch)"`
}

// WorkflowsPatchOutput is the editor's answer, as it sent it.
type WorkflowsPatchOutput struct {
	api.OpsResult
	WorkflowID string `json:"workflow_id"`
}

// WorkflowsValidateOutput tells whether a workflow can run.
type WorkflowsValidateOutput struct {
	WorkflowID       string                `json:"workflow_id"`
	Version          int64                 `json:"version"`
	Valid            bool                  `json:"valid" jsonschema:"true when the workflow can be run"`
	ValidationErrors []api.ValidationError `json:"validation_errors"`
}

// Deleted confirms a deletion.
type Deleted struct {
	ID      string `json:"id"`
	Deleted bool   `json:"deleted"`
}

func (t *tools) addWorkflowTools(s *mcp.Server) {
	mcp.AddTool(s, &mcp.Tool{
		Name: "workflows_list", Title: "List workflows", Annotations: readOnly(),
		Description: "Lists the organization's workflows, newest first (id, name, description, version; no definitions: use workflows_get), one page at a time; page with after = next_cursor.",
	}, t.workflowsList)
	mcp.AddTool(s, &mcp.Tool{
		Name: "workflows_get", Title: "Get a workflow", Annotations: readOnly(),
		Description: "Returns a workflow with its definition (blocks and edges), version and validation_errors (a workflow with validation errors is saved but cannot run).",
	}, t.workflowsGet)
	mcp.AddTool(s, &mcp.Tool{
		Name: "workflows_create", Title: "Create a workflow",
		Description: "Creates a workflow, optionally from a definition. The answer has the workflow, skipped_items (operations of the definition that were not applied, each with reason_code, reason and hint: repair them with workflows_patch) and validation_errors.",
	}, t.workflowsCreate)
	mcp.AddTool(s, &mcp.Tool{
		Name: "workflows_patch", Title: "Edit a workflow with operations",
		Description: "Applies a batch of operations (add, update, remove, connect, disconnect) in order; an operation that cannot be applied is skipped and the others still apply. " +
			"The answer is the editor's, verbatim: version, skipped_items [{operation_index, operation_type, block_id, reason_code, reason, hint:{did_you_mean, allowed, pointer}}] and validation_errors [{code, block_id, message, pointer, did_you_mean}]. " +
			"To repair, send again only the skipped operations with hint.did_you_mean (or a value of hint.allowed) put at hint.pointer.",
	}, t.workflowsPatch)
	mcp.AddTool(s, &mcp.Tool{
		Name: "workflows_validate", Title: "Validate a workflow", Annotations: readOnly(),
		Description: "Tells whether a workflow can run: valid, and its validation_errors (no_trigger, unreachable_block, missing_required_param, unknown_reference, invalid_expression, ...) with block_id and did_you_mean where known.",
	}, t.workflowsValidate)
	mcp.AddTool(s, &mcp.Tool{
		Name: "workflows_delete", Title: "Delete a workflow",
		Annotations: &mcp.ToolAnnotations{DestructiveHint: ptr(true), IdempotentHint: true},
		Description: "Deletes a workflow. Runs in flight are unaffected.",
	}, t.workflowsDelete)
}

func (t *tools) workflowsList(ctx context.Context, req *mcp.CallToolRequest, in WorkflowsListInput) (*mcp.CallToolResult, WorkflowsListOutput, error) {
	p, err := t.who(ctx, req.Extra)
	if err != nil {
		return nil, WorkflowsListOutput{}, err
	}
	page, err := boundedPage(in.Limit, func(limit int) (*api.Page, error) {
		return p.Client.ListWorkflowsPage(ctx, p.Key, in.After, limit)
	})
	if err != nil {
		return nil, WorkflowsListOutput{}, toolError(err)
	}
	out := WorkflowsListOutput{Workflows: make([]api.WorkflowSummary, 0, len(page.Items)), NextCursor: page.NextCursor}
	for _, r := range page.Items {
		w, err := api.Decode[api.WorkflowSummary](r)
		if err != nil {
			return nil, WorkflowsListOutput{}, toolError(err)
		}
		out.Workflows = append(out.Workflows, w)
	}
	return nil, out, nil
}

func (t *tools) getWorkflow(ctx context.Context, extra *mcp.RequestExtra, id string) (api.Workflow, json.RawMessage, error) {
	if strings.TrimSpace(id) == "" {
		return api.Workflow{}, nil, invalidArgument("workflow_id is empty")
	}
	p, err := t.who(ctx, extra)
	if err != nil {
		return api.Workflow{}, nil, err
	}
	raw, err := p.Client.GetWorkflow(ctx, p.Key, id)
	if err != nil {
		return api.Workflow{}, nil, toolError(err)
	}
	w, err := api.Decode[api.Workflow](raw)
	if err != nil {
		return api.Workflow{}, nil, toolError(err)
	}
	return w, raw, nil
}

func (t *tools) workflowsGet(ctx context.Context, req *mcp.CallToolRequest, in WorkflowRef) (*mcp.CallToolResult, api.Workflow, error) {
	w, _, err := t.getWorkflow(ctx, req.Extra, in.WorkflowID)
	return nil, w, err
}

func (t *tools) workflowsCreate(ctx context.Context, req *mcp.CallToolRequest, in WorkflowsCreateInput) (*mcp.CallToolResult, api.CreatedWorkflow, error) {
	p, err := t.who(ctx, req.Extra)
	if err != nil {
		return nil, api.CreatedWorkflow{}, err
	}
	body := api.CreateWorkflowRequest{Name: in.Name, Description: in.Description}
	if in.Definition != nil {
		if body.Definition, err = json.Marshal(in.Definition); err != nil {
			return nil, api.CreatedWorkflow{}, invalidArgument("definition: " + err.Error())
		}
	}
	raw, err := p.Client.CreateWorkflow(ctx, p.Key, body)
	if err != nil {
		return nil, api.CreatedWorkflow{}, toolError(err)
	}
	w, err := api.Decode[api.CreatedWorkflow](raw)
	if err != nil {
		return nil, api.CreatedWorkflow{}, toolError(err)
	}
	return verbatim(raw), w, nil
}

func (t *tools) workflowsPatch(ctx context.Context, req *mcp.CallToolRequest, in WorkflowsPatchInput) (*mcp.CallToolResult, WorkflowsPatchOutput, error) {
	if strings.TrimSpace(in.WorkflowID) == "" {
		return nil, WorkflowsPatchOutput{}, invalidArgument("workflow_id is empty")
	}
	p, err := t.who(ctx, req.Extra)
	if err != nil {
		return nil, WorkflowsPatchOutput{}, err
	}
	ops, err := json.Marshal(in.Ops)
	if err != nil {
		return nil, WorkflowsPatchOutput{}, invalidArgument("ops: " + err.Error())
	}
	raw, err := p.Client.ApplyOps(ctx, p.Key, in.WorkflowID, ops, in.IfMatch)
	if err != nil {
		return nil, WorkflowsPatchOutput{}, toolError(err)
	}
	res, err := api.Decode[api.OpsResult](raw)
	if err != nil {
		return nil, WorkflowsPatchOutput{}, toolError(err)
	}
	return verbatim(raw), WorkflowsPatchOutput{OpsResult: res, WorkflowID: in.WorkflowID}, nil
}

func (t *tools) workflowsValidate(ctx context.Context, req *mcp.CallToolRequest, in WorkflowRef) (*mcp.CallToolResult, WorkflowsValidateOutput, error) {
	w, _, err := t.getWorkflow(ctx, req.Extra, in.WorkflowID)
	if err != nil {
		return nil, WorkflowsValidateOutput{}, err
	}
	errs := w.ValidationErrors
	if errs == nil {
		errs = []api.ValidationError{}
	}
	return nil, WorkflowsValidateOutput{WorkflowID: w.ID, Version: w.Version, Valid: len(errs) == 0, ValidationErrors: errs}, nil
}

func (t *tools) workflowsDelete(ctx context.Context, req *mcp.CallToolRequest, in WorkflowRef) (*mcp.CallToolResult, Deleted, error) {
	if strings.TrimSpace(in.WorkflowID) == "" {
		return nil, Deleted{}, invalidArgument("workflow_id is empty")
	}
	p, err := t.who(ctx, req.Extra)
	if err != nil {
		return nil, Deleted{}, err
	}
	if err := p.Client.DeleteWorkflow(ctx, p.Key, in.WorkflowID); err != nil {
		return nil, Deleted{}, toolError(err)
	}
	return nil, Deleted{ID: in.WorkflowID, Deleted: true}, nil
}

// verbatim is a result whose text is the API's answer as it came, so that members the typed
// output does not name (new hint fields, say) still reach the model.
func verbatim(raw json.RawMessage) *mcp.CallToolResult {
	return &mcp.CallToolResult{Content: []mcp.Content{&mcp.TextContent{Text: string(raw)}}}
}

func ptr[T any](v T) *T { return &v }
