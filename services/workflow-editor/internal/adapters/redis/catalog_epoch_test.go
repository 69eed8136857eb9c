package redis_test

import (
	"context"
	"errors"
	"log/slog"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"svc.dev/libs/testkit"
	"svc.dev/services/workflow-editor/internal/adapters/memory"
	"svc.dev/services/workflow-editor/internal/adapters/redis"
	"svc.dev/services/workflow-editor/internal/domain/workflow"
	"svc.dev/services/workflow-editor/internal/domain/workflow/workflowtest"
)

// The decorated repository is still a repository.
func TestRepositoryContract(t *testing.T) {
	t.Parallel()
	rdb, keys := testkit.NewRedis(t)
	epochs := redis.NewRedisEpochs(rdb, keys)
	workflowtest.RunRepositoryContract(t, func(*testing.T) workflow.Repository {
		return redis.NewRepository(memory.NewWorkflowRepository(), epochs, slog.New(slog.DiscardHandler))
	})
}

// Each organization has its own counter under the prefix (its arithmetic is redisx.Epochs').
func TestRedisEpochsPerOrganization(t *testing.T) {
	t.Parallel()
	rdb, keys := testkit.NewRedis(t)
	e := redis.NewRedisEpochs(rdb, keys)
	ctx := t.Context()
	require.Equal(t, keys.Key("workflows", "epoch", "org_a"), e.Key("org_a"))
	require.NoError(t, e.Bump(ctx, "org_a"))
	first, err := rdb.Get(ctx, e.Key("org_a")).Int64()
	require.NoError(t, err)
	require.NoError(t, e.Bump(ctx, "org_a"))
	second, err := rdb.Get(ctx, e.Key("org_a")).Int64()
	require.NoError(t, err)
	require.Equal(t, first+1, second)
	require.Zero(t, rdb.Exists(ctx, e.Key("org_b")).Val(), "another organization's counter is untouched")
}

// countingBumper counts bumps per organization, failing the first failN of them.
type countingBumper struct {
	n     map[string]int
	failN int
}

func (b *countingBumper) Bump(_ context.Context, org string) error {
	if b.failN > 0 {
		b.failN--
		return errors.New("redis: connection refused")
	}
	b.n[org]++
	return nil
}

// Every write moves its organization's counter, after it is stored and even when the caller
// has gone; an update that changed nothing does not.
func TestRepositoryBumpsAfterWrites(t *testing.T) {
	t.Parallel()
	b := &countingBumper{n: map[string]int{}}
	repo := redis.NewRepository(memory.NewWorkflowRepository(), b, slog.New(slog.DiscardHandler))
	ctx := t.Context()
	w, err := workflow.New("wf_1", "org_a", "one", "", time.Now())
	require.NoError(t, err)
	require.NoError(t, repo.Add(ctx, w))
	require.Equal(t, 1, b.n["org_a"])

	unchanged := func(_ context.Context, w *workflow.Workflow) (*workflow.Workflow, error) { return w, nil }
	require.NoError(t, repo.Update(ctx, "org_a", "wf_1", unchanged))
	require.Equal(t, 1, b.n["org_a"], "nothing was written")
	refused := func(_ context.Context, w *workflow.Workflow) (*workflow.Workflow, error) {
		return nil, errors.New("refused")
	}
	require.Error(t, repo.Update(ctx, "org_a", "wf_1", refused))
	require.Equal(t, 1, b.n["org_a"], "nothing was written")

	renamed := "two"
	rename := func(_ context.Context, w *workflow.Workflow) (*workflow.Workflow, error) {
		return w, w.Describe(&renamed, nil, time.Now())
	}
	gone, cancel := context.WithCancel(ctx)
	cancel()
	b.failN = 1 // the first try fails, the retry moves it
	_ = repo.Update(gone, "org_a", "wf_1", rename)
	require.Equal(t, 2, b.n["org_a"], "a write moves the counter, even for a caller that has gone")

	require.NoError(t, repo.Delete(ctx, "org_a", "wf_1"))
	require.Equal(t, 3, b.n["org_a"])
	require.Zero(t, b.n["org_b"])
}
