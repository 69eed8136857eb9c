package app_test

import (
	"context"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"svc.dev/proto/connectors"
	"svc.dev/services/workflow-editor/internal/adapters/memory"
	"svc.dev/services/workflow-editor/internal/app"
	"svc.dev/services/workflow-editor/internal/app/command"
	"svc.dev/services/workflow-editor/internal/app/query"
	"svc.dev/services/workflow-editor/internal/domain/catalog"
	"svc.dev/services/workflow-editor/internal/domain/workflow"
)

type testBundle struct {
	app app.Application
	now time.Time
}

func setup(t *testing.T) *testBundle {
	t.Helper()
	cat, err := catalog.New(connectors.MustLoad())
	require.NoError(t, err)
	b := &testBundle{now: time.Date(2026, 11, 22, 1, 0, 0, 0, time.UTC)}
	b.app = app.New(memory.NewWorkflowRepository(), cat, func() time.Time { b.now = b.now.Add(time.Millisecond); return b.now })
	return b
}

func addLog(id string) workflow.Op {
	return workflow.Op{Type: "add", BlockID: id, BlockType: "log", Params: map[string]any{"message": id}, HasParams: true}
}

func TestCreateAppliesTheDefinitionAtVersionOne(t *testing.T) {
	t.Parallel()
	b := setup(t)
	ctx := context.Background()
	created, err := b.app.Commands.CreateWorkflow.Handle(ctx, command.CreateWorkflow{
		OrganizationID: "org_a", Name: "w",
		Ops: []workflow.Op{{Type: "add", BlockID: "t", BlockType: "trigger.manual"}, addLog("l"), {Type: "connect", BlockID: "t", TargetBlockID: "l"}, {Type: "add", BlockID: "x", BlockType: "nope"}},
	})
	require.NoError(t, err)
	require.Equal(t, int64(1), created.Version())
	require.Len(t, created.Definition().Blocks, 2)
	require.Len(t, created.Skipped, 1)
	require.Empty(t, created.ValidationErrors)

	_, err = b.app.Commands.CreateWorkflow.Handle(ctx, command.CreateWorkflow{OrganizationID: "org_a", Name: "w"})
	require.ErrorIs(t, err, workflow.ErrNameTaken)
	var invalid *workflow.InvalidError
	_, err = b.app.Commands.CreateWorkflow.Handle(ctx, command.CreateWorkflow{OrganizationID: "org_a", Name: ""})
	require.ErrorAs(t, err, &invalid)
	require.Equal(t, "name", invalid.Field)
}

func TestEditVersionsAndIfMatch(t *testing.T) {
	t.Parallel()
	b := setup(t)
	ctx := context.Background()
	created, err := b.app.Commands.CreateWorkflow.Handle(ctx, command.CreateWorkflow{OrganizationID: "org_a", Name: "w"})
	require.NoError(t, err)
	id := created.ID()
	v := func(n int64) *int64 { return &n }

	res, err := b.app.Commands.EditWorkflow.Handle(ctx, command.EditWorkflow{OrganizationID: "org_a", ID: id, IfMatch: v(1), Ops: []workflow.Op{addLog("a"), addLog("b")}})
	require.NoError(t, err)
	require.Equal(t, int64(2), res.Version)
	require.Equal(t, 2, res.Applied)
	require.Equal(t, workflow.ValidationNoTrigger, res.ValidationErrors[0].Code)

	res, err = b.app.Commands.EditWorkflow.Handle(ctx, command.EditWorkflow{OrganizationID: "org_a", ID: id, Ops: []workflow.Op{addLog("a")}})
	require.NoError(t, err)
	require.Equal(t, int64(2), res.Version, "all skipped: no new version")
	require.Len(t, res.Skipped, 1)

	var mismatch *workflow.VersionMismatchError
	_, err = b.app.Commands.EditWorkflow.Handle(ctx, command.EditWorkflow{OrganizationID: "org_a", ID: id, IfMatch: v(1), Ops: []workflow.Op{addLog("c")}})
	require.ErrorAs(t, err, &mismatch)
	require.Equal(t, int64(2), mismatch.Current)

	_, err = b.app.Commands.EditWorkflow.Handle(ctx, command.EditWorkflow{OrganizationID: "org_b", ID: id, Ops: []workflow.Op{addLog("c")}})
	require.ErrorIs(t, err, workflow.ErrNotFound)

	name := "renamed"
	got, err := b.app.Commands.DescribeWorkflow.Handle(ctx, command.DescribeWorkflow{OrganizationID: "org_a", ID: id, IfMatch: v(2), Name: &name})
	require.NoError(t, err)
	require.Equal(t, int64(3), got.Version())
	require.True(t, got.UpdatedAt().After(got.CreatedAt()))

	byName, err := b.app.Queries.GetWorkflow.Handle(ctx, query.GetWorkflow{OrganizationID: "org_a", Name: "renamed"})
	require.NoError(t, err)
	require.Equal(t, id, byName.ID())
	require.Len(t, byName.Definition().Blocks, 2)

	require.NoError(t, b.app.Commands.DeleteWorkflow.Handle(ctx, command.DeleteWorkflow{OrganizationID: "org_a", ID: id}))
	_, err = b.app.Queries.GetWorkflow.Handle(ctx, query.GetWorkflow{OrganizationID: "org_a", ID: id})
	require.ErrorIs(t, err, workflow.ErrNotFound)
}

func TestListPages(t *testing.T) {
	t.Parallel()
	b := setup(t)
	ctx := context.Background()
	var ids []string
	for _, n := range []string{"a", "b", "c"} {
		created, err := b.app.Commands.CreateWorkflow.Handle(ctx, command.CreateWorkflow{OrganizationID: "org_a", Name: n})
		require.NoError(t, err)
		ids = append([]string{created.ID()}, ids...)
	}
	page, err := b.app.Queries.ListWorkflows.Handle(ctx, query.ListWorkflows{OrganizationID: "org_a", Limit: 2})
	require.NoError(t, err)
	require.Len(t, page.Items, 2)
	require.Equal(t, ids[:2], []string{page.Items[0].ID, page.Items[1].ID})
	require.NotNil(t, page.Next)
	page, err = b.app.Queries.ListWorkflows.Handle(ctx, query.ListWorkflows{OrganizationID: "org_a", After: page.Next, Limit: 2})
	require.NoError(t, err)
	require.Len(t, page.Items, 1)
	require.Equal(t, ids[2], page.Items[0].ID)
	require.Nil(t, page.Next, "the last page says so")
}

func TestConnectorsHideHiddenParams(t *testing.T) {
	t.Parallel()
	b := setup(t)
	for _, e := range b.app.Queries.ListConnectors.Handle() {
		require.NotContains(t, string(e.Params), "allow_private_network", e.Type)
	}
}
