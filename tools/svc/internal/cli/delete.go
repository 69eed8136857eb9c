package cli

import (
	"context"
	"fmt"

	"github.com/spf13/cobra"

	api "svc.dev/clients/apiclient"
)

// deleteCommand is `svc <kind>s delete <id>`: one DELETE, then the id (JSON) or a sentence.
func (a *app) deleteCommand(kind, short string, del func(c *api.Client, ctx context.Context, key, id string) error) *cobra.Command {
	return &cobra.Command{
		Use:     "delete <" + kind + "-id>",
		Aliases: []string{"rm"},
		Short:   short,
		Args:    args(kind + "-id"),
		RunE: a.run(func(cmd *cobra.Command, argv []string) error {
			c, key, err := a.domain(cmd)
			if err != nil {
				return err
			}
			if err := del(c, cmd.Context(), key, argv[0]); err != nil {
				return err
			}
			if a.jsonOutput() {
				return writeJSON(a.out(), map[string]any{"id": argv[0], "deleted": true})
			}
			fmt.Fprintf(a.out(), "Deleted %s %s.\n", kind, argv[0])
			return nil
		}),
	}
}
