// Package app holds workflow-editor's use cases: commands that change workflows and queries
// that read them, each a small handler over the domain and the Repository port.
package app

import (
	"time"

	"svc.dev/services/workflow-editor/internal/app/command"
	"svc.dev/services/workflow-editor/internal/app/query"
	"svc.dev/services/workflow-editor/internal/domain/catalog"
	"svc.dev/services/workflow-editor/internal/domain/workflow"
)

// Application is every use case of the service.
type Application struct {
	Commands Commands
	Queries  Queries
}

// Commands change workflows.
type Commands struct {
	CreateWorkflow   command.CreateWorkflowHandler
	EditWorkflow     command.EditWorkflowHandler
	DescribeWorkflow command.DescribeWorkflowHandler
	DeleteWorkflow   command.DeleteWorkflowHandler
}

// Queries read workflows and the catalog.
type Queries struct {
	GetWorkflow    query.GetWorkflowHandler
	ListWorkflows  query.ListWorkflowsHandler
	ListConnectors query.ListConnectorsHandler
}

// New wires the use cases over repo and the catalog; now is the clock.
func New(repo workflow.Repository, cat *catalog.Catalog, now func() time.Time) Application {
	return Application{
		Commands: Commands{
			CreateWorkflow:   command.NewCreateWorkflowHandler(repo, cat, now),
			EditWorkflow:     command.NewEditWorkflowHandler(repo, cat, now),
			DescribeWorkflow: command.NewDescribeWorkflowHandler(repo, cat, now),
			DeleteWorkflow:   command.NewDeleteWorkflowHandler(repo),
		},
		Queries: Queries{
			GetWorkflow:    query.NewGetWorkflowHandler(repo, cat),
			ListWorkflows:  query.NewListWorkflowsHandler(repo),
			ListConnectors: query.NewListConnectorsHandler(cat),
		},
	}
}
