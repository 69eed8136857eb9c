package cli

import (
	"encoding/json"
	"fmt"
	"io"
	"strconv"
	"strings"

	"github.com/spf13/cobra"

	api "svc.dev/clients/apiclient"
)

// workflowView is the part of a workflow the tables show.
type workflowView struct {
	ID               string            `json:"id"`
	Name             string            `json:"name"`
	Description      string            `json:"description"`
	Version          int64             `json:"version"`
	Definition       json.RawMessage   `json:"definition"`
	ValidationErrors []validationError `json:"validation_errors"`
	SkippedItems     []skippedItem     `json:"skipped_items"`
	CreatedAt        string            `json:"createdAt"`
	UpdatedAt        string            `json:"updatedAt"`
}

type validationError struct {
	Code    string `json:"code"`
	BlockID string `json:"block_id"`
	Message string `json:"message"`
	Pointer string `json:"pointer"`
	// DidYouMean is any JSON value (a name, or a value of the param's type).
	DidYouMean json.RawMessage `json:"did_you_mean"`
}

type skippedItem struct {
	OperationIndex int    `json:"operation_index"`
	OperationType  string `json:"operation_type"`
	BlockID        string `json:"block_id"`
	ReasonCode     string `json:"reason_code"`
	Reason         string `json:"reason"`
	Hint           *struct {
		DidYouMean any    `json:"did_you_mean"`
		Allowed    []any  `json:"allowed"`
		Pointer    string `json:"pointer"`
	} `json:"hint"`
}

func (a *app) workflowsCommand() *cobra.Command {
	return a.group("workflows", "List, read, create and delete workflows", []string{"workflow", "wf"},
		a.workflowsListCommand(), a.workflowsGetCommand(), a.workflowsCreateCommand(), a.workflowsDeleteCommand())
}

func (a *app) workflowsListCommand() *cobra.Command {
	return &cobra.Command{
		Use:     "list",
		Aliases: []string{"ls"},
		Short:   "List the organization's workflows, newest first",
		Args:    args(),
		RunE: a.run(func(cmd *cobra.Command, _ []string) error {
			c, key, err := a.domain(cmd)
			if err != nil {
				return err
			}
			out := a.listPrinter([]string{"ID", "NAME", "VERSION", "UPDATED", "DESCRIPTION"}, func(it json.RawMessage) ([]string, error) {
				var w workflowView
				if err := json.Unmarshal(it, &w); err != nil {
					return nil, err
				}
				return []string{w.ID, w.Name, strconv.FormatInt(w.Version, 10), when(w.UpdatedAt), cut(w.Description, 40)}, nil
			})
			if err := c.EachWorkflow(cmd.Context(), key, out.page); err != nil {
				return err
			}
			return out.close()
		}),
	}
}

func (a *app) workflowsGetCommand() *cobra.Command {
	return &cobra.Command{
		Use:   "get <workflow-id>",
		Short: "Show a workflow with its definition",
		Args:  args("workflow-id"),
		RunE: a.run(func(cmd *cobra.Command, argv []string) error {
			c, key, err := a.domain(cmd)
			if err != nil {
				return err
			}
			raw, err := c.GetWorkflow(cmd.Context(), key, argv[0])
			if err != nil {
				return err
			}
			if a.jsonOutput() {
				return writeJSON(a.out(), raw)
			}
			var w workflowView
			if err := json.Unmarshal(raw, &w); err != nil {
				return err
			}
			out := a.out()
			fmt.Fprintf(out, "Workflow %s  %q  version %d\n", w.ID, w.Name, w.Version)
			if w.Description != "" {
				fmt.Fprintf(out, "  %s\n", w.Description)
			}
			fmt.Fprintf(out, "Created %s, updated %s\n\nDefinition:\n", when(w.CreatedAt), when(w.UpdatedAt))
			if err := writeJSON(out, w.Definition); err != nil {
				return err
			}
			printValidation(out, w.ValidationErrors)
			return nil
		}),
	}
}

func (a *app) workflowsCreateCommand() *cobra.Command {
	var name, description, file string
	cmd := &cobra.Command{
		Use:   "create --name <name> [--description <text>] [-f definition-or-ops.json]",
		Short: "Create a workflow, optionally from a definition or an operations file",
		Long: `Creates a workflow. With -f, the file is either a definition ({"blocks":[...],
"edges":[...]}) or a batch of edit operations ({"ops":[...]} or [...], as the files in
examples/ are): the operations are applied to the new, empty workflow.

Operations that cannot apply are skipped, and listed with their reasons; the workflow is
created without them and the exit code is 1, so a script notices. A batch the API refuses
as a whole leaves no workflow behind.`,
		Example: `  svc workflows create --name hello
  svc workflows create --name hello -f examples/hello.json   # {"ops":[...]}
  svc workflows create --name fetch -f definition.json       # {"blocks":[...],"edges":[...]}`,
		Args: args(),
		RunE: a.run(func(cmd *cobra.Command, _ []string) error {
			if strings.TrimSpace(name) == "" {
				return usagef(cmd, "--name is required")
			}
			req := api.CreateWorkflowRequest{Name: name, Description: description}
			var ops json.RawMessage
			if file != "" {
				doc, err := readJSONFile(file, a.env.Stdin)
				if err != nil {
					return usagef(cmd, "-f %s: %v", file, err)
				}
				if isOpsDocument(doc) {
					if ops, err = opsOf(doc); err != nil {
						return usagef(cmd, "-f %s: %v", file, err)
					}
				} else {
					req.Definition = doc
				}
			}
			c, key, err := a.domain(cmd)
			if err != nil {
				return err
			}
			raw, err := c.CreateWorkflow(cmd.Context(), key, req)
			if err != nil {
				return err
			}
			if ops != nil {
				if raw, err = applyCreatedOps(cmd.Context(), c, key, raw, ops); err != nil {
					return err
				}
			}
			var w workflowView
			if err := json.Unmarshal(raw, &w); err != nil {
				return err
			}
			if a.jsonOutput() {
				if err := writeJSON(a.out(), raw); err != nil {
					return err
				}
			} else {
				fmt.Fprintf(a.out(), "Created workflow %s (%q), version %d.\n", w.ID, w.Name, w.Version)
				printSkipped(a.out(), w.SkippedItems)
				printValidation(a.out(), w.ValidationErrors)
			}
			if n := len(w.SkippedItems); n > 0 {
				return &ExitError{Code: ExitFailure, Msg: fmt.Sprintf("workflow %s was created, but %d operation(s) of %s were skipped (see skipped_items): "+
					"fix them with 'svc ops apply %s -f <ops.json>'", w.ID, n, file, w.ID)}
			}
			return nil
		}),
	}
	cmd.Flags().StringVar(&name, "name", "", "workflow name, unique in the organization (required)")
	cmd.Flags().StringVar(&description, "description", "", "description")
	cmd.Flags().StringVarP(&file, "file", "f", "", `definition ({"blocks":[...],"edges":[...]}) or operations ({"ops":[...]}) file, "-" for stdin`)
	return cmd
}

// ---------------------------------------------------------------------------------------
// svc ops apply

// patchResult is the operations endpoint's answer.
type patchResult struct {
	OK               bool              `json:"ok"`
	Version          int64             `json:"version"`
	ValidationErrors []validationError `json:"validation_errors"`
	SkippedItems     []skippedItem     `json:"skipped_items"`
	Summary          string            `json:"summary"`
}

func (a *app) opsCommand() *cobra.Command {
	return a.group("ops", "Edit a workflow with a batch of operations", nil, a.opsApplyCommand())
}

func (a *app) opsApplyCommand() *cobra.Command {
	var (
		file    string
		ifMatch int64
	)
	cmd := &cobra.Command{
		Use:   "apply <workflow-id> -f ops.json [--if-match N]",
		Short: "Apply edit operations; invalid ones are skipped with their reasons",
		Long: `Sends the operations in the file (a JSON array of operations, or {"ops": [...]}) to the
workflow. Each is applied or skipped on its own; skipped ones are listed with their reason
code, reason and hint. With --if-match, the batch applies only if the workflow is still at
that version (else: version_mismatch, exit 1).`,
		Example: `  svc ops apply wf_123 -f ops.json
  svc ops apply wf_123 -f ops.json --if-match 3
  echo '[{"operation_type":"remove","block_id":"old"}]' | svc ops apply wf_123 -f -`,
		Args: args("workflow-id"),
		RunE: a.run(func(cmd *cobra.Command, argv []string) error {
			if file == "" {
				return usagef(cmd, "-f is required (a file of operations, or - for stdin)")
			}
			if cmd.Flags().Changed("if-match") && ifMatch < 1 {
				return usagef(cmd, "--if-match must be a positive integer (the version you expect)")
			}
			doc, err := readJSONFile(file, a.env.Stdin)
			if err != nil {
				return usagef(cmd, "-f %s: %v", file, err)
			}
			ops, err := opsOf(doc)
			if err != nil {
				return usagef(cmd, "-f %s: %v", file, err)
			}
			c, key, err := a.domain(cmd)
			if err != nil {
				return err
			}
			raw, err := c.ApplyOps(cmd.Context(), key, argv[0], ops, ifMatch)
			if err != nil {
				return err
			}
			if a.jsonOutput() {
				return writeJSON(a.out(), raw)
			}
			var res patchResult
			if err := json.Unmarshal(raw, &res); err != nil {
				return err
			}
			var n []json.RawMessage
			_ = json.Unmarshal(ops, &n)
			applied := len(n) - len(res.SkippedItems)
			fmt.Fprintf(a.out(), "Applied %d of %d operation(s), skipped %d; workflow %s is at version %d.\n",
				applied, len(n), len(res.SkippedItems), argv[0], res.Version)
			printSkipped(a.out(), res.SkippedItems)
			printValidation(a.out(), res.ValidationErrors)
			return nil
		}),
	}
	cmd.Flags().StringVarP(&file, "file", "f", "", `operations file: [op, ...] or {"ops": [...]}; "-" for stdin (required)`)
	cmd.Flags().Int64Var(&ifMatch, "if-match", 0, "apply only if the workflow is at this version")
	return cmd
}

// opsOf accepts an array of operations or an object holding one under "ops".
func opsOf(doc json.RawMessage) (json.RawMessage, error) {
	s := strings.TrimSpace(string(doc))
	switch {
	case strings.HasPrefix(s, "["):
		return doc, nil
	case strings.HasPrefix(s, "{"):
		var body struct {
			Ops json.RawMessage `json:"ops"`
		}
		if err := json.Unmarshal(doc, &body); err != nil {
			return nil, err
		}
		if !strings.HasPrefix(strings.TrimSpace(string(body.Ops)), "[") {
			return nil, fmt.Errorf(`want an array of operations or {"ops": [...]}`)
		}
		return body.Ops, nil
	}
	return nil, fmt.Errorf(`want an array of operations or {"ops": [...]}`)
}

func printSkipped(w io.Writer, items []skippedItem) {
	if len(items) == 0 {
		return
	}
	fmt.Fprintln(w, "Skipped:")
	for _, s := range items {
		target := ""
		if s.BlockID != "" {
			target = " " + s.BlockID
		}
		fmt.Fprintf(w, "  #%d %s%s: %s — %s\n", s.OperationIndex, s.OperationType, target, s.ReasonCode, s.Reason)
		if s.Hint != nil {
			var parts []string
			if s.Hint.DidYouMean != nil {
				parts = append(parts, fmt.Sprintf("did you mean %v?", s.Hint.DidYouMean))
			}
			if s.Hint.Pointer != "" {
				parts = append(parts, "at "+s.Hint.Pointer)
			}
			if len(parts) > 0 {
				fmt.Fprintf(w, "     hint: %s\n", strings.Join(parts, " "))
			}
		}
	}
}

func printValidation(w io.Writer, errs []validationError) {
	if len(errs) == 0 {
		return
	}
	fmt.Fprintln(w, "Validation errors (the workflow cannot run until they are fixed):")
	for _, e := range errs {
		where := ""
		if e.BlockID != "" {
			where = " [" + e.BlockID + "]"
		}
		fmt.Fprintf(w, "  %s%s: %s\n", e.Code, where, e.Message)
		if dym := compactJSON(e.DidYouMean, 80); dym != "" || e.Pointer != "" {
			var parts []string
			if dym != "" {
				parts = append(parts, "did you mean "+dym+"?")
			}
			if e.Pointer != "" {
				parts = append(parts, "at "+e.Pointer)
			}
			fmt.Fprintf(w, "     hint: %s\n", strings.Join(parts, " "))
		}
	}
}
