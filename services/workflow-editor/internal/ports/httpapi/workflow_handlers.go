package httpapi

import (
	"bytes"
	"encoding/json"
	"errors"
	"io"
	"net/http"
	"strconv"
	"time"

	"github.com/gorilla/mux"

	"svc.dev/libs/internalauth"
	"svc.dev/libs/web"
	"svc.dev/libs/wire"
	"svc.dev/proto/errs"
	"svc.dev/services/workflow-editor/internal/app"
	"svc.dev/services/workflow-editor/internal/app/command"
	"svc.dev/services/workflow-editor/internal/app/query"
	"svc.dev/services/workflow-editor/internal/domain/workflow"
)

type handlers struct{ app app.Application }

// listRule is the cursor rule of GET /api/workflows.
func listRule() wire.PageRule { return wire.ListRule("workflows") }

// organization is the caller's organization from the signed identity.
func organization(r *http.Request) (string, error) { return internalauth.Organization(r.Context()) }

// workflowID is the {id} of the path; a string no workflow id can be is not_found at once.
func workflowID(r *http.Request) (string, error) {
	id := mux.Vars(r)["id"]
	if !wire.ValidID(wire.Workflow, id) {
		return "", workflow.ErrNotFound
	}
	return id, nil
}

func readBody(r *http.Request) ([]byte, error) {
	raw, err := io.ReadAll(r.Body)
	var maxErr *http.MaxBytesError
	if errors.As(err, &maxErr) {
		return nil, errs.Newf(errs.PayloadTooLarge, "request body is larger than %d bytes", maxErr.Limit)
	}
	if err != nil {
		return nil, web.InvalidBody(wire.Issue{Path: "", Message: "body could not be read"})
	}
	return raw, nil
}

func setETag(w http.ResponseWriter, version int64) {
	w.Header().Set("ETag", `"`+strconv.FormatInt(version, 10)+`"`)
}

func (h handlers) createWorkflow(w http.ResponseWriter, r *http.Request) error {
	org, err := organization(r)
	if err != nil {
		return err
	}
	var req createRequest
	if err := web.Decode(r, &req); err != nil {
		return err
	}
	if req.Name == nil {
		return web.InvalidBody(wire.Issue{Path: "/name", Message: "name is required: 1 to 200 characters, unique in your organization"})
	}
	cmd := command.CreateWorkflow{OrganizationID: org, Name: *req.Name}
	if req.Description != nil {
		cmd.Description = *req.Description
	}
	if len(req.Definition) > 0 && string(req.Definition) != "null" {
		if cmd.Ops, err = definitionOps(req.Definition); err != nil {
			return err
		}
	}
	created, err := h.app.Commands.CreateWorkflow.Handle(r.Context(), cmd)
	if err != nil {
		return err
	}
	setETag(w, created.Version())
	web.WriteJSON(w, http.StatusCreated, toCreatedResponse(created))
	return nil
}

// definitionOps turns a definition given at creation into add operations (its blocks, in
// order) followed by connect operations (its edges): operation_index in skipped_items counts
// blocks first, then edges.
func definitionOps(raw json.RawMessage) ([]workflow.Op, error) {
	var def struct {
		Blocks []json.RawMessage `json:"blocks"`
		Edges  []json.RawMessage `json:"edges"`
	}
	dec := json.NewDecoder(bytes.NewReader(raw))
	dec.DisallowUnknownFields()
	if err := dec.Decode(&def); err != nil {
		return nil, web.InvalidBody(wire.Issue{Path: "/definition", Message: `definition must be {"blocks": [{"block_id", "type", "params"}], "edges": [{"block_id", "target_block_id", "branch"?}]}`})
	}
	if n := len(def.Blocks) + len(def.Edges); n > MaxOps {
		return nil, web.InvalidBody(wire.Issue{Path: "/definition", Message: "definition has more than 500 blocks and edges; create it smaller and add the rest with POST /api/workflows/:id/operations"})
	}
	var (
		ops    []workflow.Op
		issues []wire.Issue
	)
	for i, b := range def.Blocks {
		op, is := decodeDefinitionItem(b, wire.Pointer("definition", "blocks", i), "block_id", "type", "params")
		op.Type = string(workflow.OpAdd)
		ops, issues = append(ops, op), append(issues, is...)
	}
	for i, e := range def.Edges {
		op, is := decodeDefinitionItem(e, wire.Pointer("definition", "edges", i), "block_id", "target_block_id", "branch")
		op.Type = string(workflow.OpConnect)
		ops, issues = append(ops, op), append(issues, is...)
	}
	if len(issues) > 0 {
		return nil, invalidBody(issues)
	}
	return ops, nil
}

// decodeDefinitionItem reads a block or an edge like an operation, refusing members it does
// not have.
func decodeDefinitionItem(raw json.RawMessage, at string, allowed ...string) (workflow.Op, []wire.Issue) {
	op, issues := decodeOp(raw, at)
	var members map[string]json.RawMessage
	if json.Unmarshal(raw, &members) == nil {
		ok := map[string]bool{}
		for _, a := range allowed {
			ok[a] = true
		}
		for name := range members {
			if !ok[name] && isOpMember(name) {
				issues = append(issues, wire.Issue{Path: at + wire.Pointer(name), Message: "unknown member " + name + " here; allowed: " + joinQuoted(allowed)})
			}
		}
	}
	return op, issues
}

func isOpMember(name string) bool {
	for _, m := range opMembers() {
		if m == name {
			return true
		}
	}
	return false
}

func joinQuoted(names []string) string {
	out := ""
	for i, n := range names {
		if i > 0 {
			out += ", "
		}
		out += n
	}
	return out
}

func (h handlers) listWorkflows(w http.ResponseWriter, r *http.Request) error {
	org, err := organization(r)
	if err != nil {
		return err
	}
	// A cursor resumes this organization's list only.
	rule := listRule().Scoped(org)
	page, err := rule.ParsePage(r.URL.Query())
	if err != nil {
		return err
	}
	q := query.ListWorkflows{OrganizationID: org, Limit: page.Limit}
	if page.After != nil {
		pos, ok := toPosition(page.After)
		if !ok {
			return &wire.PageError{Message: "after must be a nextCursor returned by this list"}
		}
		q.After = &pos
	}
	res, err := h.app.Queries.ListWorkflows.Handle(r.Context(), q)
	if err != nil {
		return err
	}
	out := listResponse{Items: make([]summaryJSON, len(res.Items))}
	for i, s := range res.Items {
		out.Items[i] = toSummaryJSON(s)
	}
	if res.Next != nil {
		c := rule.EncodeCursor(res.Next.CreatedAt.UTC().Format(time.RFC3339Nano), res.Next.ID)
		out.NextCursor = &c
	}
	web.WriteJSON(w, http.StatusOK, out)
	return nil
}

// toPosition reads the (created_at, id) a cursor carries.
func toPosition(p []string) (workflow.Position, bool) {
	if len(p) != 2 {
		return workflow.Position{}, false
	}
	t, err := time.Parse(time.RFC3339Nano, p[0])
	if err != nil || !wire.ValidID(wire.Workflow, p[1]) {
		return workflow.Position{}, false
	}
	return workflow.Position{CreatedAt: t, ID: p[1]}, true
}

func (h handlers) getWorkflow(w http.ResponseWriter, r *http.Request) error {
	org, err := organization(r)
	if err != nil {
		return err
	}
	id, err := workflowID(r)
	if err != nil {
		return err
	}
	got, err := h.app.Queries.GetWorkflow.Handle(r.Context(), query.GetWorkflow{OrganizationID: org, ID: id})
	if err != nil {
		return err
	}
	setETag(w, got.Version())
	web.WriteJSON(w, http.StatusOK, toWorkflowResponse(got))
	return nil
}

func (h handlers) describeWorkflow(w http.ResponseWriter, r *http.Request) error {
	org, err := organization(r)
	if err != nil {
		return err
	}
	id, err := workflowID(r)
	if err != nil {
		return err
	}
	ifMatch, err := parseIfMatch(r)
	if err != nil {
		return err
	}
	var req describeRequest
	if err := web.Decode(r, &req); err != nil {
		return err
	}
	got, err := h.app.Commands.DescribeWorkflow.Handle(r.Context(), command.DescribeWorkflow{
		OrganizationID: org, ID: id, IfMatch: ifMatch, Name: req.Name, Description: req.Description,
	})
	if err != nil {
		return err
	}
	setETag(w, got.Version())
	web.WriteJSON(w, http.StatusOK, toWorkflowResponse(got))
	return nil
}

func (h handlers) deleteWorkflow(w http.ResponseWriter, r *http.Request) error {
	org, err := organization(r)
	if err != nil {
		return err
	}
	id, err := workflowID(r)
	if err != nil {
		return err
	}
	if err := h.app.Commands.DeleteWorkflow.Handle(r.Context(), command.DeleteWorkflow{OrganizationID: org, ID: id}); err != nil {
		return err
	}
	w.WriteHeader(http.StatusNoContent)
	return nil
}

// editWorkflow is the seed's patch endpoint: the If-Match header and the body are checked
// first (400), then the workflow is locked, its version compared (412) and the batch applied.
func (h handlers) editWorkflow(w http.ResponseWriter, r *http.Request) error {
	org, err := organization(r)
	if err != nil {
		return err
	}
	id, err := workflowID(r)
	if err != nil {
		return err
	}
	ifMatch, err := parseIfMatch(r)
	if err != nil {
		return err
	}
	raw, err := readBody(r)
	if err != nil {
		return err
	}
	ops, err := decodeOps(raw)
	if err != nil {
		return err
	}
	res, err := h.app.Commands.EditWorkflow.Handle(r.Context(), command.EditWorkflow{
		OrganizationID: org, ID: id, IfMatch: ifMatch, Ops: ops,
	})
	if err != nil {
		return err
	}
	setETag(w, res.Version)
	web.WriteJSON(w, http.StatusOK, toOperationsResponse(res, len(ops)))
	return nil
}

func (h handlers) listConnectors(w http.ResponseWriter, r *http.Request) error {
	if _, err := organization(r); err != nil {
		return err
	}
	web.WriteJSON(w, http.StatusOK, connectorsResponse{Connectors: h.app.Queries.ListConnectors.Handle()})
	return nil
}
