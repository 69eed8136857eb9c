package mcptools_test

import (
	"encoding/json"
	"net/http"
	"testing"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"
	"github.com/stretchr/testify/require"

	api "svc.dev/clients/apiclient"
	"svc.dev/clients/mcptools"
)

// The tools with their schemas as a client sees them, and a failure as a tool error: the
// API here is an address nothing listens on (the whole system runs in e2e/mcp_test.go).
func TestServer(t *testing.T) {
	t.Parallel()

	type testBundle struct{ session *mcp.ClientSession }

	setup := func(t *testing.T) *testBundle {
		t.Helper()
		c, err := api.NewClient("http://127.0.0.1:1", &http.Client{Timeout: 2 * time.Second}, "test")
		require.NoError(t, err)
		server := mcptools.NewServer(mcptools.Config{Principal: mcptools.Fixed(c, "svc_test"), Version: "test"})
		st, ct := mcp.NewInMemoryTransports()
		ctx := t.Context()
		ss, err := server.Connect(ctx, st, nil)
		require.NoError(t, err)
		t.Cleanup(func() { _ = ss.Close() })
		cs, err := mcp.NewClient(&mcp.Implementation{Name: "test", Version: "1"}, nil).Connect(ctx, ct, nil)
		require.NoError(t, err)
		t.Cleanup(func() { _ = cs.Close() })
		return &testBundle{session: cs}
	}

	t.Run("ToolsHaveTypedSchemas", func(t *testing.T) {
		t.Parallel()
		b := setup(t)
		res, err := b.session.ListTools(t.Context(), nil)
		require.NoError(t, err)
		names := map[string]*mcp.Tool{}
		for _, tool := range res.Tools {
			names[tool.Name] = tool
			require.NotEmpty(t, tool.Description, tool.Name)
			require.NotNil(t, tool.InputSchema, tool.Name)
			require.NotNil(t, tool.OutputSchema, tool.Name)
		}
		for _, want := range []string{"connectors_list", "connector_describe", "workflows_list", "workflows_get",
			"workflows_create", "workflows_patch", "workflows_validate", "workflows_delete", "runs_start", "runs_get",
			"runs_list", "runs_logs", "runs_signal", "runs_cancel", "runs_wait", "schedules_list", "schedules_create",
			"schedules_update", "schedules_delete"} {
			require.Contains(t, names, want)
		}
		// Every property's schema is an object: clients built on the TypeScript SDK (the MCP
		// Inspector) refuse a tool list with a boolean schema (Go's "any" infers "true").
		for _, tool := range res.Tools {
			for what, schema := range map[string]any{"input": tool.InputSchema, "output": tool.OutputSchema} {
				b, err := json.Marshal(schema)
				require.NoError(t, err)
				var v any
				require.NoError(t, json.Unmarshal(b, &v))
				requireObjectProperties(t, tool.Name+" "+what, v)
			}
		}
		in, err := json.Marshal(names["workflows_patch"].InputSchema)
		require.NoError(t, err)
		require.Contains(t, string(in), `"required":["workflow_id","ops"]`)
	})

	t.Run("ResourcesAndGuide", func(t *testing.T) {
		t.Parallel()
		b := setup(t)
		rs, err := b.session.ListResources(t.Context(), nil)
		require.NoError(t, err)
		uris := []string{}
		for _, r := range rs.Resources {
			uris = append(uris, r.URI)
		}
		require.ElementsMatch(t, []string{mcptools.GuideURI, mcptools.CatalogURI}, uris)
		ts, err := b.session.ListResourceTemplates(t.Context(), nil)
		require.NoError(t, err)
		require.Len(t, ts.ResourceTemplates, 1)
		require.Equal(t, mcptools.WorkflowURITemplate, ts.ResourceTemplates[0].URITemplate)
		g, err := b.session.ReadResource(t.Context(), &mcp.ReadResourceParams{URI: mcptools.GuideURI})
		require.NoError(t, err)
		require.Contains(t, g.Contents[0].Text, "did_you_mean")
	})

	t.Run("FailuresAreToolErrorsWithACode", func(t *testing.T) {
		t.Parallel()
		b := setup(t)
		res, err := b.session.CallTool(t.Context(), &mcp.CallToolParams{Name: "workflows_get", Arguments: map[string]any{"workflow_id": "wf_x"}})
		require.NoError(t, err)
		require.True(t, res.IsError)
		var body map[string]any
		require.NoError(t, json.Unmarshal([]byte(res.Content[0].(*mcp.TextContent).Text), &body))
		require.Equal(t, "unavailable", body["error"])

		res, err = b.session.CallTool(t.Context(), &mcp.CallToolParams{Name: "runs_wait", Arguments: map[string]any{"run_id": "run_x", "timeout_seconds": 500}})
		require.NoError(t, err)
		require.True(t, res.IsError)
		require.Contains(t, res.Content[0].(*mcp.TextContent).Text, `"error":"invalid_argument"`)

		// A missing required argument is refused by the input schema, also as a tool error.
		res, err = b.session.CallTool(t.Context(), &mcp.CallToolParams{Name: "workflows_patch", Arguments: map[string]any{"workflow_id": "wf_x"}})
		require.NoError(t, err)
		require.True(t, res.IsError)
		require.Contains(t, res.Content[0].(*mcp.TextContent).Text, "ops")
	})
}

func TestToolErrorCarriesTheAPIAnswer(t *testing.T) {
	t.Parallel()
	e := &mcptools.ToolError{Code: "workflow_invalid", Message: "fix it", Status: 400,
		Body: map[string]any{"error": "workflow_invalid", "validation_errors": []any{map[string]any{"code": "no_trigger"}}}}
	var body map[string]any
	require.NoError(t, json.Unmarshal([]byte(e.Error()), &body))
	require.Equal(t, "workflow_invalid", body["error"])
	require.Equal(t, "fix it", body["message"])
	require.EqualValues(t, 400, body["status"])
	require.NotEmpty(t, body["validation_errors"])
}

func requireObjectProperties(t *testing.T, where string, schema any) {
	t.Helper()
	m, ok := schema.(map[string]any)
	if !ok {
		return
	}
	props, _ := m["properties"].(map[string]any)
	for name, p := range props {
		_, isObject := p.(map[string]any)
		require.True(t, isObject, "%s: property %s has schema %v", where, name, p)
		requireObjectProperties(t, where+"."+name, p)
	}
	if items, ok := m["items"].(map[string]any); ok {
		requireObjectProperties(t, where+"[]", items)
	}
}
