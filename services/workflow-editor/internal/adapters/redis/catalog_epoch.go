// Package redis holds workflow-editor's Redis adapter: the catalog epoch, per organization a
// counter that moves forward after every write to the organization's workflows, before the
// write is answered. run-orchestrator keeps the snapshots it reads from this service only
// while the counter still holds the value it read before reading them (its Redis adapter
// reads the same keys), so a change that returned is seen by the very next start.
package redis

import (
	"context"
	"log/slog"
	"time"

	"github.com/redis/go-redis/v9"

	"svc.dev/libs/redisx"
	"svc.dev/services/workflow-editor/internal/domain/workflow"
)

// KeyName is the first part of an organization's counter under SVC_REDIS_PREFIX; the
// orchestrator reads the same keys.
const KeyName = "workflows:epoch"

// bumpTimeout bounds one increment: the answer to the write waits for it.
const bumpTimeout = 200 * time.Millisecond

// RedisEpochs increments <prefix>workflows:epoch:<organization> (redisx.Epochs: a lost counter
// restarts from the current time, never from a value it held).
type RedisEpochs struct {
	epochs *redisx.Epochs
	keys   redisx.Keys
}

// NewRedisEpochs returns the counters in rdb under keys.
func NewRedisEpochs(rdb redis.UniversalClient, keys redisx.Keys) *RedisEpochs {
	return &RedisEpochs{epochs: redisx.NewEpochs(rdb), keys: keys}
}

// Key is the counter of org.
func (e *RedisEpochs) Key(org string) string { return e.keys.Key(KeyName, org) }

// Bump moves org's counter forward by one.
func (e *RedisEpochs) Bump(ctx context.Context, org string) error {
	ctx, cancel := context.WithTimeout(ctx, bumpTimeout)
	defer cancel()
	_, err := e.epochs.Bump(ctx, e.Key(org))
	return err
}

// Bumper moves an organization's counter forward.
type Bumper interface {
	Bump(ctx context.Context, org string) error
}

// Repository is a workflow.Repository that moves the organization's counter after every call
// that wrote or may have written (Add, Delete, and an Update whose function changed the
// workflow), whatever the call returned: an error may come after the commit. The counter is
// moved even when the caller has gone (the write may still have committed), retrying once; if
// both tries fail, that is logged, and an orchestrator that did not itself fail to read Redis
// meanwhile (which drops its cache) uses its entries until they expire
// (SVC_ORCHESTRATOR_SNAPSHOT_CACHE_TTL).
type Repository struct {
	next   workflow.Repository
	epochs Bumper
	log    *slog.Logger
}

// NewRepository decorates next.
func NewRepository(next workflow.Repository, epochs Bumper, log *slog.Logger) *Repository {
	if next == nil || epochs == nil || log == nil {
		panic("nil dependency")
	}
	return &Repository{next: next, epochs: epochs, log: log}
}

func (r *Repository) bump(ctx context.Context, org string) {
	ctx = context.WithoutCancel(ctx)
	err := r.epochs.Bump(ctx, org)
	if err == nil {
		return
	}
	if err = r.epochs.Bump(ctx, org); err != nil {
		r.log.ErrorContext(ctx, "catalog epoch not moved; the orchestrators' snapshot caches are exact again when their entries expire",
			"err", err, "organization", org)
	}
}

// Add stores a new workflow, then moves its organization's counter.
func (r *Repository) Add(ctx context.Context, w *workflow.Workflow) error {
	err := r.next.Add(ctx, w)
	r.bump(ctx, w.OrganizationID())
	return err
}

// Get reads through.
func (r *Repository) Get(ctx context.Context, organizationID, id string) (*workflow.Workflow, error) {
	return r.next.Get(ctx, organizationID, id)
}

// GetByName reads through.
func (r *Repository) GetByName(ctx context.Context, organizationID, name string) (*workflow.Workflow, error) {
	return r.next.GetByName(ctx, organizationID, name)
}

// List reads through.
func (r *Repository) List(ctx context.Context, organizationID string, after *workflow.Position, limit int) ([]workflow.Summary, error) {
	return r.next.List(ctx, organizationID, after, limit)
}

// Update runs through next and moves the counter when updateFunc changed the workflow (a patch
// that applied nothing, or a dry run, leaves the caches alone).
func (r *Repository) Update(ctx context.Context, organizationID, id string, updateFunc func(ctx context.Context, w *workflow.Workflow) (*workflow.Workflow, error)) error {
	changed := false
	err := r.next.Update(ctx, organizationID, id, func(ctx context.Context, w *workflow.Workflow) (*workflow.Workflow, error) {
		loaded := w.Version()
		updated, err := updateFunc(ctx, w)
		changed = err == nil && updated != nil && updated.Version() != loaded
		return updated, err
	})
	if changed {
		r.bump(ctx, organizationID)
	}
	return err
}

// Delete removes a workflow, then moves its organization's counter.
func (r *Repository) Delete(ctx context.Context, organizationID, id string) error {
	err := r.next.Delete(ctx, organizationID, id)
	r.bump(ctx, organizationID)
	return err
}
