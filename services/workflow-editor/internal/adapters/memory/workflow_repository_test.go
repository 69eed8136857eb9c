package memory_test

import (
	"testing"

	"svc.dev/services/workflow-editor/internal/adapters/memory"
	"svc.dev/services/workflow-editor/internal/domain/workflow"
	"svc.dev/services/workflow-editor/internal/domain/workflow/workflowtest"
)

func TestWorkflowRepository(t *testing.T) {
	t.Parallel()
	workflowtest.RunRepositoryContract(t, func(*testing.T) workflow.Repository { return memory.NewWorkflowRepository() })
}
