package httpapi

import (
	"encoding/json"
	"fmt"
	"strings"

	"svc.dev/libs/wire"
	"svc.dev/proto/connectors"
	"svc.dev/services/workflow-editor/internal/app/command"
	"svc.dev/services/workflow-editor/internal/domain/workflow"
)

// workflowResponse is a workflow as GET /api/workflows/:id shows it (docs/API.md).
type workflowResponse struct {
	ID               string                `json:"id"`
	Name             string                `json:"name"`
	Description      string                `json:"description"`
	Version          int64                 `json:"version"`
	Definition       workflow.Definition   `json:"definition"`
	ValidationErrors []validationErrorJSON `json:"validation_errors"`
	CreatedAt        wire.Time             `json:"createdAt"`
	UpdatedAt        wire.Time             `json:"updatedAt"`
}

// createdResponse is the 201 body of a create: the workflow and the skipped operations of the
// definition it was given.
type createdResponse struct {
	workflowResponse
	SkippedItems []skippedItemJSON `json:"skipped_items"`
}

type summaryJSON struct {
	ID          string    `json:"id"`
	Name        string    `json:"name"`
	Description string    `json:"description"`
	Version     int64     `json:"version"`
	CreatedAt   wire.Time `json:"createdAt"`
	UpdatedAt   wire.Time `json:"updatedAt"`
}

type listResponse struct {
	Items      []summaryJSON `json:"items"`
	NextCursor *string       `json:"nextCursor"`
}

// operationsResponse is the patch endpoint's 200 body (seed).
type operationsResponse struct {
	OK               bool                  `json:"ok"`
	Version          int64                 `json:"version"`
	ValidationErrors []validationErrorJSON `json:"validation_errors"`
	SkippedItems     []skippedItemJSON     `json:"skipped_items"`
	Summary          string                `json:"summary"`
}

type skippedItemJSON struct {
	OperationIndex int       `json:"operation_index"`
	OperationType  string    `json:"operation_type"`
	BlockID        string    `json:"block_id"`
	ReasonCode     string    `json:"reason_code"`
	Reason         string    `json:"reason"`
	Hint           *hintJSON `json:"hint,omitempty"`
	// Problems is every problem of the operation, this item's own first, when it has more
	// than one.
	Problems []problemJSON `json:"problems,omitempty"`
}

type problemJSON struct {
	ReasonCode string    `json:"reason_code"`
	Reason     string    `json:"reason"`
	Hint       *hintJSON `json:"hint,omitempty"`
}

// hintJSON is a hint on the wire. did_you_mean is a JSON value: a string (a type, a param
// name, a block id, a value) or, where the value meant is not a string, that value (2000).
type hintJSON struct {
	DidYouMean any    `json:"did_you_mean,omitempty"`
	Allowed    []any  `json:"allowed,omitempty"`
	Pointer    string `json:"pointer,omitempty"`
}

type validationErrorJSON struct {
	Code       string `json:"code"`
	BlockID    string `json:"block_id,omitempty"`
	Message    string `json:"message"`
	Pointer    string `json:"pointer,omitempty"`
	DidYouMean string `json:"did_you_mean,omitempty"`
	// NoIncomingEdge lists, for no_trigger, the blocks no edge leads into: where the trigger
	// connects.
	NoIncomingEdge []string `json:"no_incoming_edge,omitempty"`
}

type connectorsResponse struct {
	Connectors []connectors.Entry `json:"connectors"`
}

// createRequest is the body of POST /api/workflows. definition stays raw: its numbers must be
// read exactly, and it is checked member by member like a batch of operations.
type createRequest struct {
	Name        *string         `json:"name"`
	Description *string         `json:"description"`
	Definition  json.RawMessage `json:"definition"`
}

// describeRequest is the body of PATCH /api/workflows/:id.
type describeRequest struct {
	Name        *string `json:"name"`
	Description *string `json:"description"`
}

func toWorkflowResponse(c workflow.Checked) workflowResponse {
	w := c.Workflow
	return workflowResponse{
		ID: w.ID(), Name: w.Name(), Description: w.Description(), Version: w.Version(),
		Definition: w.Definition(), ValidationErrors: toValidationErrorsJSON(c.ValidationErrors),
		CreatedAt: wire.NewTime(w.CreatedAt()), UpdatedAt: wire.NewTime(w.UpdatedAt()),
	}
}

func toCreatedResponse(c command.CreatedWorkflow) createdResponse {
	return createdResponse{workflowResponse: toWorkflowResponse(c.Checked), SkippedItems: toSkippedItemsJSON(c.Skipped)}
}

func toSummaryJSON(s workflow.Summary) summaryJSON {
	return summaryJSON{ID: s.ID, Name: s.Name, Description: s.Description, Version: s.Version,
		CreatedAt: wire.NewTime(s.CreatedAt), UpdatedAt: wire.NewTime(s.UpdatedAt)}
}

func toOperationsResponse(res command.EditResult, total int) operationsResponse {
	return operationsResponse{
		OK:               len(res.Skipped) == 0,
		Version:          res.Version,
		ValidationErrors: toValidationErrorsJSON(res.ValidationErrors),
		SkippedItems:     toSkippedItemsJSON(res.Skipped),
		Summary:          summary(total, res.Applied, res.Skipped),
	}
}

// summary is the seed's human-readable line, in its two exact forms.
func summary(total, applied int, skipped []workflow.Skip) string {
	if len(skipped) == 0 {
		return fmt.Sprintf("Applied all %d operation(s) successfully.", total)
	}
	const shown = 20
	parts := make([]string, 0, min(len(skipped), shown)+1)
	for i, s := range skipped {
		if i == shown {
			parts = append(parts, fmt.Sprintf("and %d more", len(skipped)-shown))
			break
		}
		what := s.OperationType
		if what == "" {
			what = "operation"
		}
		if s.BlockID != "" {
			what += fmt.Sprintf(" %q", s.BlockID)
		}
		parts = append(parts, fmt.Sprintf("#%d %s: %s", s.OperationIndex, what, s.ReasonCode))
	}
	return fmt.Sprintf("Applied %d operation(s). %d skipped: %s.", applied, len(skipped), strings.Join(parts, "; "))
}

func toSkippedItemsJSON(skips []workflow.Skip) []skippedItemJSON {
	out := make([]skippedItemJSON, len(skips))
	for i, s := range skips {
		out[i] = skippedItemJSON{OperationIndex: s.OperationIndex, OperationType: s.OperationType, BlockID: s.BlockID,
			ReasonCode: string(s.ReasonCode), Reason: s.Reason}
		out[i].Hint = toHintJSON(s.Hint)
		if len(s.Problems) > 1 {
			out[i].Problems = make([]problemJSON, len(s.Problems))
			for j, p := range s.Problems {
				out[i].Problems[j] = problemJSON{ReasonCode: string(p.ReasonCode), Reason: p.Reason, Hint: toHintJSON(p.Hint)}
			}
		}
	}
	return out
}

func toHintJSON(h workflow.Hint) *hintJSON {
	if h.Empty() {
		return nil
	}
	out := &hintJSON{Pointer: h.Pointer}
	switch {
	case h.Value != nil:
		out.DidYouMean = h.Value
	case h.DidYouMean != "":
		out.DidYouMean = h.DidYouMean
	}
	switch {
	case h.AllowedValues != nil:
		out.Allowed = h.AllowedValues
	case len(h.Allowed) > 0:
		out.Allowed = make([]any, len(h.Allowed))
		for i, a := range h.Allowed {
			out.Allowed[i] = a
		}
	}
	return out
}

func toValidationErrorsJSON(errs []workflow.ValidationError) []validationErrorJSON {
	out := make([]validationErrorJSON, len(errs))
	for i, e := range errs {
		out[i] = validationErrorJSON{Code: string(e.Code), BlockID: e.BlockID, Message: e.Message, Pointer: e.Pointer, DidYouMean: e.DidYouMean, NoIncomingEdge: e.NoIncomingEdge}
	}
	return out
}
