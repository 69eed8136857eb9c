package mcptools

import (
	"context"
	"encoding/json"
	"slices"
	"strings"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	api "svc.dev/clients/apiclient"
)

// ConnectorsListInput filters the catalog.
type ConnectorsListInput struct {
	Category string `json:"category,omitempty" jsonschema:"only connectors of this category: trigger, action, logic or wait"`
}

// ConnectorSummary is a catalog entry without its schemas.
type ConnectorSummary struct {
	Type        string `json:"type"`
	Category    string `json:"category"`
	Title       string `json:"title"`
	Description string `json:"description"`
}

// ConnectorsListOutput is the catalog in short.
type ConnectorsListOutput struct {
	Connectors []ConnectorSummary `json:"connectors"`
}

// ConnectorDescribeInput names a connector.
type ConnectorDescribeInput struct {
	Type string `json:"type" jsonschema:"a connector type from connectors_list, e.g. http.request"`
}

func (t *tools) addConnectorTools(s *mcp.Server) {
	mcp.AddTool(s, &mcp.Tool{
		Name:        "connectors_list",
		Title:       "List connectors",
		Description: "Lists the block types a workflow can use (type, category, title, description). Use connector_describe for a type's params and output schemas.",
		Annotations: readOnly(),
	}, t.connectorsList)
	mcp.AddTool(s, &mcp.Tool{
		Name:        "connector_describe",
		Title:       "Describe a connector",
		Description: "Returns one connector of the catalog: its params JSON Schema (what an add operation's params may hold), its output JSON Schema (what downstream blocks read as steps.<block_id>.output), retry policy and timeout.",
		Annotations: readOnly(),
	}, t.connectorDescribe)
}

func (t *tools) catalog(ctx context.Context, extra *mcp.RequestExtra) ([]api.Connector, error) {
	p, err := t.who(ctx, extra)
	if err != nil {
		return nil, err
	}
	raw, err := p.Client.ListConnectors(ctx, p.Key)
	if err != nil {
		return nil, toolError(err)
	}
	out := make([]api.Connector, 0, len(raw))
	for _, r := range raw {
		c, err := api.Decode[api.Connector](r)
		if err != nil {
			return nil, toolError(err)
		}
		out = append(out, c)
	}
	return out, nil
}

func (t *tools) connectorsList(ctx context.Context, req *mcp.CallToolRequest, in ConnectorsListInput) (*mcp.CallToolResult, ConnectorsListOutput, error) {
	cs, err := t.catalog(ctx, req.Extra)
	if err != nil {
		return nil, ConnectorsListOutput{}, err
	}
	out := ConnectorsListOutput{Connectors: []ConnectorSummary{}}
	for _, c := range cs {
		if in.Category != "" && c.Category != in.Category {
			continue
		}
		out.Connectors = append(out.Connectors, ConnectorSummary{Type: c.Type, Category: c.Category, Title: c.Title, Description: c.Description})
	}
	return nil, out, nil
}

func (t *tools) connectorDescribe(ctx context.Context, req *mcp.CallToolRequest, in ConnectorDescribeInput) (*mcp.CallToolResult, api.Connector, error) {
	cs, err := t.catalog(ctx, req.Extra)
	if err != nil {
		return nil, api.Connector{}, err
	}
	types := make([]string, 0, len(cs))
	for _, c := range cs {
		if c.Type == in.Type {
			return nil, c, nil
		}
		types = append(types, c.Type)
	}
	slices.Sort(types)
	body := map[string]any{"allowed": types}
	if near := closest(in.Type, types); near != "" {
		body["did_you_mean"] = near
	}
	return nil, api.Connector{}, &ToolError{Code: "connector_not_found", Status: 404, Body: body,
		Message: "no connector " + quote(in.Type) + "; the types are " + strings.Join(types, ", ")}
}

// closest is the candidate nearest to s by edit distance, if it is near enough to be a slip.
func closest(s string, candidates []string) string {
	best, bestD := "", len(s)/2+2
	for _, c := range candidates {
		if d := distance(strings.ToLower(s), strings.ToLower(c)); d < bestD {
			best, bestD = c, d
		}
	}
	return best
}

// distance is the Levenshtein distance.
func distance(a, b string) int {
	prev := make([]int, len(b)+1)
	cur := make([]int, len(b)+1)
	for j := range prev {
		prev[j] = j
	}
	for i := 1; i <= len(a); i++ {
		cur[0] = i
		for j := 1; j <= len(b); j++ {
			cost := 1
			if a[i-1] == b[j-1] {
				cost = 0
			}
			cur[j] = min(prev[j]+1, cur[j-1]+1, prev[j-1]+cost)
		}
		prev, cur = cur, prev
	}
	return prev[len(b)]
}

func quote(s string) string {
	b, _ := json.Marshal(s)
	return string(b)
}

func readOnly() *mcp.ToolAnnotations {
	return &mcp.ToolAnnotations{ReadOnlyHint: true}
}
