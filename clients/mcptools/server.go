// Package mcptools is the MCP server of the public API: its tools, resources and guide, over
// the typed API client (clients/apiclient). It is a driving adapter, not a bounded context: every
// tool is one or a few public API calls made as the caller, so tenancy, validation and limits
// are the API's. Both transports share it: stdio in the CLI (`svc mcp`) and streamable HTTP
// at /api/mcp in the gateway.
package mcptools

import (
	"context"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	api "svc.dev/clients/apiclient"
)

// ServerName is the implementation name the server announces.
const ServerName = "svc"

// Principal is whom a request acts as: the client to call the API with and the API key to
// send ("" when the client carries the credential itself, api.Client.WithAuth).
type Principal struct {
	Client *api.Client
	Key    string
}

// PrincipalFunc picks the principal of one request from what its transport carried (extra
// is nil on stdio; over HTTP it holds the request's headers).
type PrincipalFunc func(ctx context.Context, extra *mcp.RequestExtra) (Principal, error)

// Config is what a server needs.
type Config struct {
	// Principal is called once per tool call or resource read.
	Principal PrincipalFunc
	// Version is the announced server version.
	Version string
}

// Fixed is the PrincipalFunc of a process that acts as one principal (the CLI).
func Fixed(c *api.Client, key string) PrincipalFunc {
	if c == nil {
		panic("nil api client")
	}
	return func(context.Context, *mcp.RequestExtra) (Principal, error) {
		return Principal{Client: c, Key: key}, nil
	}
}

// instructions tell a model how the tools fit together.
const instructions = `Tools of a durable workflow engine. A workflow is a graph of blocks (one trigger, then actions)
joined by edges. To build one: read the resource svc://guide (or connectors_list and
connector_describe), create it with workflows_create, change it with workflows_patch (a batch of
operations; each operation that is not applied comes back in skipped_items with reason_code and
hint.did_you_mean / hint.allowed / hint.pointer: apply the hint and send only the repaired
operations again), check validation_errors is empty, then runs_start, runs_wait, runs_logs.
A run waiting for a signal (waiting.kind "signal") continues after runs_signal with that name.
Errors are tool errors whose text is JSON: {"error": code, "message": ..., "status": HTTP status}.`

// NewServer returns the MCP server with every tool and resource.
func NewServer(cfg Config) *mcp.Server {
	if cfg.Principal == nil {
		panic("nil principal func")
	}
	version := cfg.Version
	if version == "" {
		version = "dev"
	}
	s := mcp.NewServer(&mcp.Implementation{Name: ServerName, Title: "Workflow control plane", Version: version},
		&mcp.ServerOptions{Instructions: instructions})
	t := &tools{principal: cfg.Principal, timing: defaultWaitTiming()}
	t.addConnectorTools(s)
	t.addWorkflowTools(s)
	t.addRunTools(s)
	t.addScheduleTools(s)
	t.addResources(s)
	return s
}

// tools holds what every handler shares.
type tools struct {
	principal PrincipalFunc
	// timing paces runs_wait (run_wait.go).
	timing waitTiming
}

func (t *tools) who(ctx context.Context, extra *mcp.RequestExtra) (Principal, error) {
	p, err := t.principal(ctx, extra)
	if err != nil {
		return Principal{}, toolError(err)
	}
	return p, nil
}
