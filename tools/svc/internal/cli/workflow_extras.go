package cli

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"slices"
	"strings"

	"github.com/spf13/cobra"

	api "svc.dev/clients/apiclient"
)

// isOpsDocument tells an operations file ([op, ...] or {"ops": ...}) from a definition
// ({"blocks": ..., "edges": ...}).
func isOpsDocument(doc json.RawMessage) bool {
	s := strings.TrimSpace(string(doc))
	if strings.HasPrefix(s, "[") {
		return true
	}
	var probe map[string]json.RawMessage
	if json.Unmarshal(doc, &probe) != nil {
		return false
	}
	_, ok := probe["ops"]
	return ok
}

// applyCreatedOps applies ops to the workflow just created (created is the 201 body) and
// returns the workflow as it then is, with the batch's skipped items: the shape a create with
// a definition answers. A batch the API refuses as a whole (invalid_body) deletes the new,
// empty workflow again, so that the same command can be retried as it is.
func applyCreatedOps(ctx context.Context, c *api.Client, key string, created, ops json.RawMessage) (json.RawMessage, error) {
	var w struct {
		ID      string `json:"id"`
		Version int64  `json:"version"`
	}
	if err := json.Unmarshal(created, &w); err != nil || w.ID == "" {
		return nil, fmt.Errorf("create: the answer holds no workflow id")
	}
	res, err := c.ApplyOps(ctx, key, w.ID, ops, w.Version)
	if err != nil {
		var apiErr *api.Error
		if errors.As(err, &apiErr) && apiErr.Status < 500 {
			if delErr := c.DeleteWorkflow(ctx, key, w.ID); delErr != nil {
				return nil, fmt.Errorf("the operations were refused (%w), and the empty workflow %s could not be deleted: %w", err, w.ID, delErr)
			}
		}
		return nil, err
	}
	var patch struct {
		SkippedItems json.RawMessage `json:"skipped_items"`
	}
	if err := json.Unmarshal(res, &patch); err != nil {
		return nil, fmt.Errorf("operations: %w", err)
	}
	got, err := c.GetWorkflow(ctx, key, w.ID)
	if err != nil {
		return nil, err
	}
	var out map[string]json.RawMessage
	if err := json.Unmarshal(got, &out); err != nil {
		return nil, fmt.Errorf("workflow %s: %w", w.ID, err)
	}
	if len(patch.SkippedItems) == 0 || string(patch.SkippedItems) == "null" {
		patch.SkippedItems = json.RawMessage("[]")
	}
	out["skipped_items"] = patch.SkippedItems
	return json.Marshal(out)
}

func (a *app) workflowsDeleteCommand() *cobra.Command {
	return a.deleteCommand("workflow", "Delete a workflow (runs in flight are unaffected)", (*api.Client).DeleteWorkflow)
}

// connectorView is the part of a catalog entry the table shows.
type connectorView struct {
	Type        string `json:"type"`
	Category    string `json:"category"`
	Title       string `json:"title"`
	Description string `json:"description"`
	Params      struct {
		Required   []string                   `json:"required"`
		Properties map[string]json.RawMessage `json:"properties"`
	} `json:"params"`
}

func (a *app) connectorsCommand() *cobra.Command {
	return &cobra.Command{
		Use:     "connectors",
		Aliases: []string{"connector", "catalog"},
		Short:   "List the block types a workflow can use, with their params",
		Long: `Lists the connector catalog: each block type with its category, title and params
(required ones marked *). JSON output is the catalog as the API sends it, with the params'
and outputs' JSON Schemas, retry policies and timeouts.`,
		Example: `  svc connectors
  svc connectors -o json | jq '.[] | select(.type == "http.request")'`,
		Args: args(),
		RunE: a.run(func(cmd *cobra.Command, _ []string) error {
			c, key, err := a.domain(cmd)
			if err != nil {
				return err
			}
			items, err := c.ListConnectors(cmd.Context(), key)
			if err != nil {
				return err
			}
			if a.jsonOutput() {
				return writeJSON(a.out(), rawArray(items))
			}
			rows := make([][]string, 0, len(items))
			for _, it := range items {
				var cv connectorView
				if err := json.Unmarshal(it, &cv); err != nil {
					return err
				}
				rows = append(rows, []string{cv.Type, cv.Category, cv.Title, paramList(cv)})
			}
			return table(a.out(), []string{"TYPE", "CATEGORY", "TITLE", "PARAMS"}, rows)
		}),
	}
}

// paramList names a connector's params, required ones first and marked with *.
func paramList(cv connectorView) string {
	required := map[string]bool{}
	var names []string
	for _, r := range cv.Params.Required {
		required[r] = true
		names = append(names, r+"*")
	}
	var optional []string
	for p := range cv.Params.Properties {
		if !required[p] {
			optional = append(optional, p)
		}
	}
	slices.Sort(optional)
	names = append(names, optional...)
	if len(names) == 0 {
		return "-"
	}
	return strings.Join(names, ", ")
}

// runRefusal turns a start the API refused because the workflow has validation errors (400
// workflow_invalid) into an error that lists them, so the caller sees what to fix.
func runRefusal(err error, workflowID string) error {
	var apiErr *api.Error
	if !errors.As(err, &apiErr) || apiErr.Code != "workflow_invalid" {
		return err
	}
	var body struct {
		ValidationErrors []validationError `json:"validation_errors"`
	}
	if json.Unmarshal(apiErr.Body, &body) != nil || len(body.ValidationErrors) == 0 {
		return err
	}
	var b strings.Builder
	fmt.Fprintf(&b, "%s (HTTP %d)\n", apiErr, apiErr.Status)
	printValidation(&b, body.ValidationErrors)
	fmt.Fprintf(&b, "Fix them ('svc ops apply %s -f ops.json') and run again.", workflowID)
	return &ExitError{Code: ExitFailure, Msg: b.String()}
}
