package cli

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"strconv"
	"strings"
	"time"

	"github.com/spf13/cobra"

	api "svc.dev/clients/apiclient"
)

// Follow polling: fast while attempts change, slowing down while nothing does, so a long
// wait costs few requests (the default rate limit is 60 a minute per key).
const (
	followMinInterval = 200 * time.Millisecond
	followMaxInterval = 2 * time.Second
	logsPageLimit     = 100
)

// runView is the part of a run the CLI reads.
type runView struct {
	RunID           string          `json:"runId"`
	WorkflowID      string          `json:"workflowId"`
	WorkflowVersion int64           `json:"workflowVersion"`
	Status          string          `json:"status"`
	Input           json.RawMessage `json:"input"`
	Output          json.RawMessage `json:"output"`
	Error           *struct {
		BlockID string `json:"block_id"`
		Message string `json:"message"`
	} `json:"error"`
	Trigger *struct {
		Kind string `json:"kind"`
	} `json:"trigger"`
	Waiting *struct {
		BlockID string `json:"block_id"`
		Kind    string `json:"kind"`
		Until   string `json:"until"`
		Signal  string `json:"signal"`
	} `json:"waiting"`
	CreatedAt  string `json:"createdAt"`
	StartedAt  string `json:"startedAt"`
	FinishedAt string `json:"finishedAt"`
}

func (r runView) terminal() bool {
	return r.Status == "completed" || r.Status == "failed" || r.Status == "cancelled"
}

// attemptView is one step attempt of the logs.
type attemptView struct {
	ID         string          `json:"id"`
	BlockID    string          `json:"block_id"`
	Type       string          `json:"type"`
	Attempt    int             `json:"attempt"`
	Status     string          `json:"status"`
	StartedAt  string          `json:"startedAt"`
	FinishedAt string          `json:"finishedAt"`
	DurationMs *int64          `json:"durationMs"`
	Output     json.RawMessage `json:"output"`
	Error      *struct {
		Message string `json:"message"`
		Code    string `json:"code"`
	} `json:"error"`
}

func (a *app) runCommand() *cobra.Command {
	var (
		input, idempotencyKey string
		follow                bool
	)
	cmd := &cobra.Command{
		Use:   "run <workflow-id> [--input JSON] [--follow]",
		Short: "Start a run of a workflow, optionally following it to its end",
		Long: `Starts a run of the workflow with the given input (inline JSON, @file, or @- for
stdin). With --follow, follows the run's event stream until the run ends: attempts, retries
and when they run, what the run waits for (polling an API without the stream); JSON lines
when piped. The exit code is then 0 only if the run completed (1 if it failed or was
cancelled).`,
		Example: `  svc run wf_123
  svc run wf_123 --input '{"n": 5}' --follow
  svc run wf_123 --input @input.json --idempotency-key nightly-2026-11-22`,
		Args: args("workflow-id"),
		RunE: a.run(func(cmd *cobra.Command, argv []string) error {
			req := api.StartRunRequest{IdempotencyKey: idempotencyKey}
			if input != "" {
				in, err := readJSONArg(input, a.env.Stdin)
				if err != nil {
					return usagef(cmd, "--input: %v", err)
				}
				req.Input = in
			}
			c, key, err := a.domain(cmd)
			if err != nil {
				return err
			}
			raw, err := c.StartRun(cmd.Context(), key, argv[0], req)
			if err != nil {
				return runRefusal(err, argv[0])
			}
			var started struct {
				RunID string `json:"runId"`
				Spec  string `json:"spec"`
			}
			if err := json.Unmarshal(raw, &started); err != nil {
				return err
			}
			if !follow {
				if a.jsonOutput() {
					return writeJSON(a.out(), raw)
				}
				fmt.Fprintf(a.out(), "Started run %s (%s).\nFollow it: svc runs logs %s --follow\n", started.RunID, started.Spec, started.RunID)
				return nil
			}
			if a.jsonOutput() {
				if err := writeJSONLine(a.out(), raw); err != nil {
					return err
				}
			} else {
				fmt.Fprintf(a.out(), "Started run %s of %s.\n", started.RunID, argv[0])
			}
			return a.follow(cmd.Context(), c, key, started.RunID)
		}),
	}
	cmd.Flags().StringVar(&input, "input", "", "run input: JSON, @file or @- (stdin)")
	cmd.Flags().BoolVarP(&follow, "follow", "F", false, "print step attempts until the run ends; exit 0 only if it completed")
	cmd.Flags().StringVar(&idempotencyKey, "idempotency-key", "", "the same key within 24 h returns the same run and starts nothing")
	return cmd
}

func (a *app) runsCommand() *cobra.Command {
	return a.group("runs", "Inspect and steer runs", nil,
		a.runsListCommand(), a.runsGetCommand(), a.runsLogsCommand(), a.runsCancelCommand(), a.runsSignalCommand())
}

func (a *app) runsListCommand() *cobra.Command {
	var workflowID, status string
	cmd := &cobra.Command{
		Use:     "list [--workflow <id>] [--status <status>]",
		Aliases: []string{"ls"},
		Short:   "List runs, newest first",
		Args:    args(),
		RunE: a.run(func(cmd *cobra.Command, _ []string) error {
			c, key, err := a.domain(cmd)
			if err != nil {
				return err
			}
			out := a.listPrinter([]string{"RUN", "WORKFLOW", "VERSION", "STATUS", "CREATED", "FINISHED"}, func(it json.RawMessage) ([]string, error) {
				var r runView
				if err := json.Unmarshal(it, &r); err != nil {
					return nil, err
				}
				return []string{r.RunID, r.WorkflowID, strconv.FormatInt(r.WorkflowVersion, 10), r.Status, when(r.CreatedAt), when(r.FinishedAt)}, nil
			})
			if err := c.EachRun(cmd.Context(), key, workflowID, status, out.page); err != nil {
				return err
			}
			return out.close()
		}),
	}
	cmd.Flags().StringVar(&workflowID, "workflow", "", "only runs of this workflow")
	cmd.Flags().StringVar(&status, "status", "", "only runs in this status (queued, running, waiting, completed, failed, cancelled)")
	return cmd
}

func (a *app) runsGetCommand() *cobra.Command {
	var withWorkflow bool
	cmd := &cobra.Command{
		Use:   "get <run-id>",
		Short: "Show a run",
		Args:  args("run-id"),
		RunE: a.run(func(cmd *cobra.Command, argv []string) error {
			c, key, err := a.domain(cmd)
			if err != nil {
				return err
			}
			raw, err := c.GetRun(cmd.Context(), key, argv[0], withWorkflow)
			if err != nil {
				return err
			}
			if a.jsonOutput() {
				return writeJSON(a.out(), raw)
			}
			var r runView
			if err := json.Unmarshal(raw, &r); err != nil {
				return err
			}
			printRun(a.out(), r)
			return nil
		}),
	}
	cmd.Flags().BoolVar(&withWorkflow, "workflow", false, "include the workflow definition the run is pinned to (JSON output)")
	return cmd
}

func printRun(w io.Writer, r runView) {
	rows := [][2]string{
		{"Run", r.RunID},
		{"Workflow", fmt.Sprintf("%s (version %d)", r.WorkflowID, r.WorkflowVersion)},
		{"Status", r.Status},
	}
	if r.Trigger != nil {
		rows = append(rows, [2]string{"Trigger", r.Trigger.Kind})
	}
	if r.Waiting != nil {
		what := r.Waiting.Kind + " at " + r.Waiting.BlockID
		if r.Waiting.Signal != "" {
			what += ", signal " + strconv.Quote(r.Waiting.Signal)
		}
		if r.Waiting.Until != "" {
			what += ", until " + when(r.Waiting.Until)
		}
		rows = append(rows, [2]string{"Waiting", what})
	}
	rows = append(rows, [2]string{"Created", when(r.CreatedAt)}, [2]string{"Started", when(r.StartedAt)}, [2]string{"Finished", when(r.FinishedAt)})
	rows = append(rows, [2]string{"Input", orDash(compactJSON(r.Input, 200))}, [2]string{"Output", orDash(compactJSON(r.Output, 200))})
	if r.Error != nil {
		rows = append(rows, [2]string{"Error", r.Error.BlockID + ": " + r.Error.Message})
	}
	for _, row := range rows {
		fmt.Fprintf(w, "%-9s %s\n", row[0]+":", row[1])
	}
}

func (a *app) runsLogsCommand() *cobra.Command {
	var follow bool
	cmd := &cobra.Command{
		Use:   "logs <run-id> [--follow]",
		Short: "Print a run's step attempts; --follow until the run ends",
		Long: `Prints every step attempt of the run. With --follow, follows the run's event stream
until the run ends, as 'svc run --follow' does; the exit code is then 0 only if the run
completed (1 if it failed or was cancelled).`,
		Args: args("run-id"),
		RunE: a.run(func(cmd *cobra.Command, argv []string) error {
			c, key, err := a.domain(cmd)
			if err != nil {
				return err
			}
			if follow {
				return a.follow(cmd.Context(), c, key, argv[0])
			}
			// Page by page, printing each: a page may be short and not the last (the API stops a
			// page at a byte budget), so only an empty page ends the log.
			out := a.listPrinter(nil, nil)
			cursor := ""
			for {
				p, err := c.Logs(cmd.Context(), key, argv[0], cursor, logsPageLimit)
				if err != nil {
					return err
				}
				if a.jsonOutput() {
					err = out.page(p.Items)
				} else {
					for _, it := range p.Items {
						if err = printAttempt(a.out(), it); err != nil {
							break
						}
					}
				}
				if err != nil {
					return err
				}
				// A cursor that did not move would read the same page again.
				if len(p.Items) == 0 || p.NextCursor == nil || *p.NextCursor == cursor {
					break
				}
				cursor = *p.NextCursor
			}
			if a.jsonOutput() {
				return out.close()
			}
			return nil
		}),
	}
	cmd.Flags().BoolVarP(&follow, "follow", "F", false, "keep printing until the run ends; exit 0 only if it completed")
	return cmd
}

// poll is follow against an API without the event stream: it prints the run's attempts as
// they change until the run ends, then the run (JSON: one object per line, attempts then the
// run), and the run's status (through rd, as a run.status event) each time it or what the run
// waits for changes. It reads the status before draining the logs, so every attempt written
// before the run ended is printed before poll stops; it prints the status after the attempts,
// since the status is stamped with the time it is printed and the attempts with theirs (the
// first read prints a run under way all at once). A run that did not complete is an
// *ExitError.
func (a *app) poll(ctx context.Context, c *api.Client, key, runID string, rd *eventRenderer) error {
	cursor := ""
	interval := followMinInterval
	lastStatus := ""
	for {
		raw, r, err := readRun(ctx, c, key, runID)
		if err != nil {
			return err
		}
		changed := false
		for {
			p, err := c.Logs(ctx, key, runID, cursor, logsPageLimit)
			if err != nil {
				return err
			}
			for _, it := range p.Items {
				changed = true
				if a.jsonOutput() {
					err = writeJSONLine(a.out(), it)
				} else {
					err = printAttempt(a.out(), it)
				}
				if err != nil {
					return err
				}
			}
			moved := p.NextCursor != nil && *p.NextCursor != "" && *p.NextCursor != cursor
			if moved {
				cursor = *p.NextCursor
			}
			// A short page may not be the last (the API stops a page at a byte budget): the
			// logs are drained when a page is empty (or its cursor did not move: the same page
			// would come again).
			if len(p.Items) == 0 || !moved {
				break
			}
		}
		status := map[string]any{"runId": r.RunID, "status": r.Status}
		if r.Waiting != nil {
			status["waiting"] = r.Waiting
		}
		if st, err := json.Marshal(status); err == nil && !r.terminal() && string(st) != lastStatus {
			lastStatus, changed = string(st), true
			if _, err := rd.render(api.Event{Kind: "run.status", Data: st}); err != nil {
				return err
			}
		}
		if r.terminal() {
			return a.finish(raw, r)
		}
		if changed {
			interval = followMinInterval
		} else {
			interval = min(interval*3/2, followMaxInterval)
		}
		if err := a.env.Sleep(ctx, interval); err != nil {
			return err
		}
	}
}

// finish prints the ended run and turns an end other than completed into exit code 1.
func (a *app) finish(raw json.RawMessage, r runView) error {
	if a.jsonOutput() {
		if err := writeJSONLine(a.out(), raw); err != nil {
			return err
		}
	} else {
		fmt.Fprintf(a.out(), "Run %s %s.", r.RunID, r.Status)
		if out := compactJSON(r.Output, 300); out != "" && r.Status == "completed" {
			fmt.Fprintf(a.out(), " Output: %s", out)
		}
		fmt.Fprintln(a.out())
	}
	if r.Status == "completed" {
		return nil
	}
	msg := fmt.Sprintf("run %s %s", r.RunID, r.Status)
	if r.Error != nil {
		msg += fmt.Sprintf(": block %s: %s", r.Error.BlockID, r.Error.Message)
	}
	return &ExitError{Code: ExitFailure, Msg: msg}
}

// printAttempt is one line: time, block#attempt, type, status, duration, error or output.
func printAttempt(w io.Writer, raw json.RawMessage) error {
	var at attemptView
	if err := json.Unmarshal(raw, &at); err != nil {
		return err
	}
	stamp := "--:--:--.---"
	if t, err := time.Parse(time.RFC3339Nano, at.StartedAt); err == nil {
		stamp = t.Local().Format("15:04:05.000")
	}
	dur := ""
	if at.DurationMs != nil {
		dur = strconv.FormatInt(*at.DurationMs, 10) + "ms"
	}
	detail := ""
	switch {
	case at.Error != nil:
		detail = "error: " + at.Error.Message
		if at.Error.Code != "" {
			detail = "error " + at.Error.Code + ": " + at.Error.Message
		}
	case at.Status == "succeeded":
		detail = compactJSON(at.Output, 120)
	}
	line := fmt.Sprintf("%s  %-24s %-14s %-9s %7s  %s", stamp, at.BlockID+"#"+strconv.Itoa(at.Attempt), at.Type, at.Status, dur, detail)
	_, err := fmt.Fprintln(w, strings.TrimRight(line, " "))
	return err
}

func (a *app) runsCancelCommand() *cobra.Command {
	return &cobra.Command{
		Use:   "cancel <run-id>",
		Short: "Cancel a run; its running step is cancelled and nothing else starts",
		Args:  args("run-id"),
		RunE: a.run(func(cmd *cobra.Command, argv []string) error {
			c, key, err := a.domain(cmd)
			if err != nil {
				return err
			}
			raw, err := c.CancelRun(cmd.Context(), key, argv[0])
			if err != nil {
				return err
			}
			if a.jsonOutput() {
				return writeJSON(a.out(), raw)
			}
			fmt.Fprintf(a.out(), "Run %s cancelled.\n", argv[0])
			return nil
		}),
	}
}

func (a *app) runsSignalCommand() *cobra.Command {
	var name, payload string
	cmd := &cobra.Command{
		Use:     "signal <run-id> --name <name> [--payload JSON]",
		Short:   "Send a signal to a run (releases a wait on that signal name)",
		Example: `  svc runs signal run_123 --name approved --payload '{"by": "ana"}'`,
		Args:    args("run-id"),
		RunE: a.run(func(cmd *cobra.Command, argv []string) error {
			if strings.TrimSpace(name) == "" {
				return usagef(cmd, "--name is required")
			}
			req := api.SignalRequest{Name: name}
			if payload != "" {
				p, err := readJSONArg(payload, a.env.Stdin)
				if err != nil {
					return usagef(cmd, "--payload: %v", err)
				}
				req.Payload = p
			}
			c, key, err := a.domain(cmd)
			if err != nil {
				return err
			}
			raw, err := c.SignalRun(cmd.Context(), key, argv[0], req)
			if err != nil {
				return err
			}
			if a.jsonOutput() {
				return writeJSON(a.out(), raw)
			}
			var res struct {
				SignalID  string `json:"signalId"`
				Delivered bool   `json:"delivered"`
			}
			if err := json.Unmarshal(raw, &res); err != nil {
				return err
			}
			state := "stored; no wait has consumed it yet"
			if res.Delivered {
				state = "delivered to a waiting step"
			}
			fmt.Fprintf(a.out(), "Signal %s %q %s.\n", res.SignalID, name, state)
			return nil
		}),
	}
	cmd.Flags().StringVar(&name, "name", "", "signal name (required)")
	cmd.Flags().StringVar(&payload, "payload", "", "signal payload: JSON, @file or @- (stdin)")
	return cmd
}
