package cli

import (
	"encoding/json"
	"fmt"

	"github.com/spf13/cobra"
)

// retentionView is the part of the retention answer the text output shows.
type retentionView struct {
	OrganizationID  string  `json:"organizationId"`
	RunRetention    *string `json:"runRetention"`
	ServerRetention string  `json:"serverRetention"`
	Effective       string  `json:"effectiveRetention"`
}

func (a *app) retentionCommand() *cobra.Command {
	var set string
	var reset bool
	cmd := &cobra.Command{
		Use:   "retention [--set <period> | --reset]",
		Short: "Show or change how long the organization's finished runs are kept",
		Long: "Finished runs older than the period are deleted with their logs. The server's period is the\n" +
			"longest; --set chooses a shorter one (\"168h\", \"30d\", at least \"1m\"), --reset goes back to\n" +
			"the server's. Changing it needs an owner or admin, or an API key.",
		Args: args(),
		RunE: a.run(func(cmd *cobra.Command, _ []string) error {
			if set != "" && reset {
				return fmt.Errorf("--set and --reset cannot be used together")
			}
			c, key, err := a.domain(cmd)
			if err != nil {
				return err
			}
			var raw json.RawMessage
			switch {
			case set != "":
				raw, err = c.SetRetention(cmd.Context(), key, &set)
			case reset:
				raw, err = c.SetRetention(cmd.Context(), key, nil)
			default:
				raw, err = c.Retention(cmd.Context(), key)
			}
			if err != nil {
				return err
			}
			if a.jsonOutput() {
				return writeJSON(a.out(), raw)
			}
			var v retentionView
			if err := json.Unmarshal(raw, &v); err != nil {
				return err
			}
			own := "the server's"
			if v.RunRetention != nil {
				own = *v.RunRetention
			}
			fmt.Fprintf(a.out(), "Finished runs of %s are kept for %s (organization's period: %s; server's: %s).\n",
				v.OrganizationID, v.Effective, own, v.ServerRetention)
			return nil
		}),
	}
	cmd.Flags().StringVar(&set, "set", "", "the organization's own period, e.g. 168h or 30d")
	cmd.Flags().BoolVar(&reset, "reset", false, "use the server's period again")
	return cmd
}
