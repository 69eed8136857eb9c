// Package memory is an in-memory workflow.Repository for the app layer's unit tests. The
// contract suite it shares with the Postgres adapter keeps the two behaving alike.
package memory

import (
	"context"
	"fmt"
	"sort"
	"sync"

	"svc.dev/services/workflow-editor/internal/domain/workflow"
)

// WorkflowRepository keeps workflows in a map under one mutex, which plays the row lock.
type WorkflowRepository struct {
	mu   sync.Mutex
	rows map[string]row
}

// row is a stored workflow: a copy, so callers never share state with the store.
type row struct {
	w *workflow.Workflow
}

var _ workflow.Repository = (*WorkflowRepository)(nil)

// NewWorkflowRepository returns an empty repository.
func NewWorkflowRepository() *WorkflowRepository {
	return &WorkflowRepository{rows: map[string]row{}}
}

func clone(w *workflow.Workflow) *workflow.Workflow {
	return workflow.UnmarshalFromDatabase(w.ID(), w.OrganizationID(), w.Name(), w.Description(), w.Version(),
		w.Definition().Clone(), w.CreatedAt(), w.UpdatedAt())
}

func (r *WorkflowRepository) nameTaken(org, name, except string) bool {
	for id, row := range r.rows {
		if id != except && row.w.OrganizationID() == org && row.w.Name() == name {
			return true
		}
	}
	return false
}

// Add stores a new workflow.
func (r *WorkflowRepository) Add(_ context.Context, w *workflow.Workflow) error {
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.nameTaken(w.OrganizationID(), w.Name(), "") {
		return fmt.Errorf("add workflow: %w", workflow.ErrNameTaken)
	}
	if _, ok := r.rows[w.ID()]; ok {
		return fmt.Errorf("add workflow: id %s exists", w.ID())
	}
	r.rows[w.ID()] = row{w: clone(w)}
	return nil
}

// Get returns a workflow by id.
func (r *WorkflowRepository) Get(_ context.Context, organizationID, id string) (*workflow.Workflow, error) {
	r.mu.Lock()
	defer r.mu.Unlock()
	row, ok := r.rows[id]
	if !ok || row.w.OrganizationID() != organizationID {
		return nil, fmt.Errorf("get workflow %s: %w", id, workflow.ErrNotFound)
	}
	return clone(row.w), nil
}

// GetByName returns a workflow by name.
func (r *WorkflowRepository) GetByName(_ context.Context, organizationID, name string) (*workflow.Workflow, error) {
	r.mu.Lock()
	defer r.mu.Unlock()
	for _, row := range r.rows {
		if row.w.OrganizationID() == organizationID && row.w.Name() == name {
			return clone(row.w), nil
		}
	}
	return nil, fmt.Errorf("get workflow by name: %w", workflow.ErrNotFound)
}

// List returns a page of workflows, newest first.
func (r *WorkflowRepository) List(_ context.Context, organizationID string, after *workflow.Position, limit int) ([]workflow.Summary, error) {
	r.mu.Lock()
	defer r.mu.Unlock()
	var all []workflow.Summary
	for _, row := range r.rows {
		w := row.w
		if w.OrganizationID() != organizationID {
			continue
		}
		all = append(all, workflow.Summary{ID: w.ID(), Name: w.Name(), Description: w.Description(),
			Version: w.Version(), CreatedAt: w.CreatedAt(), UpdatedAt: w.UpdatedAt()})
	}
	sort.Slice(all, func(i, j int) bool {
		return newer(all[i].CreatedAt.UnixNano(), all[i].ID, all[j].CreatedAt.UnixNano(), all[j].ID)
	})
	out := make([]workflow.Summary, 0, limit)
	for _, s := range all {
		if after != nil && !newer(after.CreatedAt.UnixNano(), after.ID, s.CreatedAt.UnixNano(), s.ID) {
			continue
		}
		if len(out) == limit {
			break
		}
		out = append(out, s)
	}
	return out, nil
}

// newer reports whether (ta, ida) sorts before (tb, idb) in a newest-first list.
func newer(ta int64, ida string, tb int64, idb string) bool {
	if ta != tb {
		return ta > tb
	}
	return ida > idb
}

// Update runs updateFunc with the store locked.
func (r *WorkflowRepository) Update(ctx context.Context, organizationID, id string, updateFunc func(ctx context.Context, w *workflow.Workflow) (*workflow.Workflow, error)) error {
	r.mu.Lock()
	defer r.mu.Unlock()
	cur, ok := r.rows[id]
	if !ok || cur.w.OrganizationID() != organizationID {
		return fmt.Errorf("update workflow %s: %w", id, workflow.ErrNotFound)
	}
	updated, err := updateFunc(ctx, clone(cur.w))
	if err != nil {
		return fmt.Errorf("update workflow %s: %w", id, err)
	}
	if updated == nil || updated.Version() == cur.w.Version() {
		return nil
	}
	if r.nameTaken(organizationID, updated.Name(), id) {
		return fmt.Errorf("update workflow %s: %w", id, workflow.ErrNameTaken)
	}
	r.rows[id] = row{w: clone(updated)}
	return nil
}

// Delete removes a workflow.
func (r *WorkflowRepository) Delete(_ context.Context, organizationID, id string) error {
	r.mu.Lock()
	defer r.mu.Unlock()
	cur, ok := r.rows[id]
	if !ok || cur.w.OrganizationID() != organizationID {
		return fmt.Errorf("delete workflow %s: %w", id, workflow.ErrNotFound)
	}
	delete(r.rows, id)
	return nil
}
