package postgres_test

import (
	"testing"

	"svc.dev/libs/testkit"
	"svc.dev/services/workflow-editor/internal/adapters/postgres"
	"svc.dev/services/workflow-editor/internal/domain/workflow"
	"svc.dev/services/workflow-editor/internal/domain/workflow/workflowtest"
	"svc.dev/services/workflow-editor/migrations"
)

func TestWorkflowRepository(t *testing.T) {
	t.Parallel()
	workflowtest.RunRepositoryContract(t, func(t *testing.T) workflow.Repository {
		return postgres.NewWorkflowRepository(testkit.NewSchema(t, migrations.FS))
	})
}
