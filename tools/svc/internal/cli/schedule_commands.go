package cli

import (
	"encoding/json"
	"fmt"
	"strconv"
	"strings"

	"github.com/spf13/cobra"

	api "svc.dev/clients/apiclient"
)

// scheduleView is the part of a schedule the table shows.
type scheduleView struct {
	ID          string  `json:"id"`
	WorkflowID  string  `json:"workflowId"`
	Cron        string  `json:"cron"`
	Timezone    string  `json:"timezone"`
	Enabled     bool    `json:"enabled"`
	LastFiredAt *string `json:"lastFiredAt"`
	NextFireAt  *string `json:"nextFireAt"`
}

func (a *app) schedulesCommand() *cobra.Command {
	return a.group("schedules", "List, create and delete cron schedules of workflows", []string{"schedule"},
		a.schedulesListCommand(), a.schedulesCreateCommand(), a.schedulesDeleteCommand())
}

func (a *app) schedulesListCommand() *cobra.Command {
	var workflowID string
	cmd := &cobra.Command{
		Use:     "list [--workflow <id>]",
		Aliases: []string{"ls"},
		Short:   "List schedules",
		Args:    args(),
		RunE: a.run(func(cmd *cobra.Command, _ []string) error {
			c, key, err := a.domain(cmd)
			if err != nil {
				return err
			}
			out := a.listPrinter([]string{"ID", "WORKFLOW", "CRON", "TIMEZONE", "ENABLED", "NEXT FIRE", "LAST FIRED"}, func(it json.RawMessage) ([]string, error) {
				var s scheduleView
				if err := json.Unmarshal(it, &s); err != nil {
					return nil, err
				}
				return []string{s.ID, s.WorkflowID, s.Cron, s.Timezone, strconv.FormatBool(s.Enabled), stampOrDash(s.NextFireAt), stampOrDash(s.LastFiredAt)}, nil
			})
			if err := c.EachSchedule(cmd.Context(), key, workflowID, out.page); err != nil {
				return err
			}
			return out.close()
		}),
	}
	cmd.Flags().StringVar(&workflowID, "workflow", "", "only schedules of this workflow")
	return cmd
}

func stampOrDash(s *string) string {
	if s == nil {
		return "-"
	}
	return when(*s)
}

func (a *app) schedulesCreateCommand() *cobra.Command {
	var (
		workflowID, cron, timezone, input string
		disabled                          bool
	)
	cmd := &cobra.Command{
		Use:   "create --workflow <id> --cron <expr> [--timezone <IANA>] [--input JSON]",
		Short: "Create a schedule that starts runs of a workflow",
		Example: `  svc schedules create --workflow wf_123 --cron "*/15 * * * *"
  svc schedules create --workflow wf_123 --cron @daily --timezone Europe/Paris --input '{"report": "daily"}'`,
		Args: args(),
		RunE: a.run(func(cmd *cobra.Command, _ []string) error {
			if strings.TrimSpace(workflowID) == "" {
				return usagef(cmd, "--workflow is required")
			}
			if strings.TrimSpace(cron) == "" {
				return usagef(cmd, "--cron is required (5 fields, or a descriptor such as @hourly)")
			}
			req := api.CreateScheduleRequest{WorkflowID: workflowID, Cron: cron, Timezone: timezone}
			if input != "" {
				in, err := readJSONArg(input, a.env.Stdin)
				if err != nil {
					return usagef(cmd, "--input: %v", err)
				}
				req.Input = in
			}
			if disabled {
				f := false
				req.Enabled = &f
			}
			c, key, err := a.domain(cmd)
			if err != nil {
				return err
			}
			raw, err := c.CreateSchedule(cmd.Context(), key, req)
			if err != nil {
				return err
			}
			if a.jsonOutput() {
				return writeJSON(a.out(), raw)
			}
			var s scheduleView
			if err := json.Unmarshal(raw, &s); err != nil {
				return err
			}
			fmt.Fprintf(a.out(), "Created schedule %s: %s (%s) runs %s; next fire %s.\n", s.ID, s.Cron, s.Timezone, s.WorkflowID, stampOrDash(s.NextFireAt))
			return nil
		}),
	}
	cmd.Flags().StringVar(&workflowID, "workflow", "", "workflow to run (required)")
	cmd.Flags().StringVar(&cron, "cron", "", "cron expression: 5 fields or @hourly-style (required)")
	cmd.Flags().StringVar(&timezone, "timezone", "", "IANA time zone (default UTC)")
	cmd.Flags().StringVar(&input, "input", "", "run input: JSON, @file or @- (stdin)")
	cmd.Flags().BoolVar(&disabled, "disabled", false, "create the schedule disabled")
	return cmd
}

func (a *app) schedulesDeleteCommand() *cobra.Command {
	return a.deleteCommand("schedule", "Delete a schedule", (*api.Client).DeleteSchedule)
}

func (a *app) completionCommand(root *cobra.Command) *cobra.Command {
	return &cobra.Command{
		Use:   "completion bash|zsh|fish",
		Short: "Print a shell completion script",
		Example: `  source <(svc completion bash)
  svc completion zsh > "${fpath[1]}/_svc"
  svc completion fish > ~/.config/fish/completions/svc.fish`,
		ValidArgs: []string{"bash", "zsh", "fish"},
		Args:      args("shell"),
		RunE: a.run(func(cmd *cobra.Command, argv []string) error {
			switch argv[0] {
			case "bash":
				return root.GenBashCompletionV2(a.out(), true)
			case "zsh":
				return root.GenZshCompletion(a.out())
			case "fish":
				return root.GenFishCompletion(a.out(), true)
			}
			return usagef(cmd, "unknown shell %q: want bash, zsh or fish", argv[0])
		}),
	}
}
