package cli

import (
	"errors"
	"io"

	"github.com/modelcontextprotocol/go-sdk/mcp"
	"github.com/spf13/cobra"

	"svc.dev/clients/mcptools"
)

// mcpCommand serves the MCP tools over stdio: an agent's MCP client starts `svc mcp` as a
// subprocess and speaks newline-delimited JSON-RPC on its stdin and stdout. The tools act
// with the credentials every domain command uses ($SVC_API_KEY, else the saved login).
func (a *app) mcpCommand() *cobra.Command {
	return &cobra.Command{
		Use:   "mcp",
		Short: "Serve the API's tools to an AI agent over MCP (stdio)",
		Long: `Runs a Model Context Protocol server on stdin and stdout, for an agent's MCP client to
start as a subprocess. Its tools (connectors, workflows, runs, schedules) and resources (the
catalog, each workflow, a guide to building one) act with the credentials other commands
use: $SVC_API_KEY, else the key saved by 'svc login' for the API (--api, $SVC_API or the last
login's). Nothing but MCP messages is written to stdout; errors go to stderr.

Example client configuration:
  {"mcpServers": {"svc": {"command": "svc", "args": ["mcp"], "env": {"SVC_API": "http://localhost:8080"}}}}

The same tools are served over HTTP by the API itself at /api/mcp.`,
		Args: args(),
		RunE: a.run(func(cmd *cobra.Command, _ []string) error {
			c, key, err := a.domain(cmd)
			if err != nil {
				return err
			}
			server := mcptools.NewServer(mcptools.Config{Principal: mcptools.Fixed(c, key), Version: cmp(a.env.Version, "dev")})
			transport := &mcp.IOTransport{Reader: io.NopCloser(a.env.Stdin), Writer: nopWriteCloser{a.env.Stdout}}
			err = server.Run(cmd.Context(), transport)
			// The client closing stdin is the normal end of a session; an interrupt is too.
			if errors.Is(err, io.EOF) || cmd.Context().Err() != nil {
				err = nil
			}
			return err
		}),
	}
}

// nopWriteCloser keeps the process's stdout open when the session closes its writer.
type nopWriteCloser struct{ io.Writer }

func (nopWriteCloser) Close() error { return nil }
