package mcptools

import (
	"context"
	_ "embed"
	"encoding/json"
	"strings"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	api "svc.dev/clients/apiclient"
)

// Resource addresses.
const (
	CatalogURI          = "svc://connectors"
	GuideURI            = "svc://guide"
	WorkflowURITemplate = "svc://workflows/{id}"
	workflowURIPrefix   = "svc://workflows/"
)

// guide is the short guide to building a workflow.
//
//go:embed guide.md
var guide string

func (t *tools) addResources(s *mcp.Server) {
	s.AddResource(&mcp.Resource{
		URI: GuideURI, Name: "guide", Title: "Building a workflow", MIMEType: "text/markdown",
		Description: "How to build, repair, run and signal a workflow with these tools, with a complete example.",
	}, func(_ context.Context, req *mcp.ReadResourceRequest) (*mcp.ReadResourceResult, error) {
		return &mcp.ReadResourceResult{Contents: []*mcp.ResourceContents{{URI: GuideURI, MIMEType: "text/markdown", Text: guide}}}, nil
	})
	s.AddResource(&mcp.Resource{
		URI: CatalogURI, Name: "connectors", Title: "Connector catalog", MIMEType: "application/json",
		Description: "Every block type with its params and output JSON Schemas, retry policy and timeout.",
	}, t.readCatalog)
	s.AddResourceTemplate(&mcp.ResourceTemplate{
		URITemplate: WorkflowURITemplate, Name: "workflow", Title: "Workflow", MIMEType: "application/json",
		Description: "A workflow of the organization with its definition and validation_errors (id wf_...).",
	}, t.readWorkflow)
}

func (t *tools) readCatalog(ctx context.Context, req *mcp.ReadResourceRequest) (*mcp.ReadResourceResult, error) {
	p, err := t.who(ctx, req.Extra)
	if err != nil {
		return nil, err
	}
	raw, err := p.Client.ListConnectors(ctx, p.Key)
	if err != nil {
		return nil, toolError(err)
	}
	b, err := json.Marshal(map[string]any{"connectors": raw})
	if err != nil {
		return nil, err
	}
	return &mcp.ReadResourceResult{Contents: []*mcp.ResourceContents{{URI: CatalogURI, MIMEType: "application/json", Text: string(b)}}}, nil
}

func (t *tools) readWorkflow(ctx context.Context, req *mcp.ReadResourceRequest) (*mcp.ReadResourceResult, error) {
	uri := req.Params.URI
	id, ok := strings.CutPrefix(uri, workflowURIPrefix)
	if !ok || id == "" || strings.Contains(id, "/") {
		return nil, mcp.ResourceNotFoundError(uri)
	}
	p, err := t.who(ctx, req.Extra)
	if err != nil {
		return nil, err
	}
	raw, err := p.Client.GetWorkflow(ctx, p.Key, id)
	if err != nil {
		var apiErr *api.Error
		if asAPIError(err, &apiErr) && apiErr.Status == 404 {
			return nil, mcp.ResourceNotFoundError(uri)
		}
		return nil, toolError(err)
	}
	return &mcp.ReadResourceResult{Contents: []*mcp.ResourceContents{{URI: uri, MIMEType: "application/json", Text: string(raw)}}}, nil
}
