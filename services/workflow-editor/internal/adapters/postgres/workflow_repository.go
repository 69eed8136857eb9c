// Package postgres stores workflows in the editor schema. The definition is one jsonb document
// per workflow; If-Match and apply are made atomic by a row lock (SELECT ... FOR UPDATE) held
// for the whole of an Update.
//
// The SQL is written by hand (docs/adr/0011-sql-written-in-the-adapters.md); the adapter tests
// run every statement against real Postgres.
package postgres

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"
	"github.com/jackc/pgx/v5/pgxpool"

	"svc.dev/libs/pgdb"
	"svc.dev/services/workflow-editor/internal/domain/workflow"
)

// WorkflowRepository is the Postgres workflow.Repository.
type WorkflowRepository struct{ pool *pgxpool.Pool }

var _ workflow.Repository = (*WorkflowRepository)(nil)

// NewWorkflowRepository returns the repository over pool, whose search_path is the editor schema.
func NewWorkflowRepository(pool *pgxpool.Pool) *WorkflowRepository {
	if pool == nil {
		panic("nil pool")
	}
	return &WorkflowRepository{pool: pool}
}

const (
	columns = `id, organization_id, name, description, version, definition, created_at, updated_at`

	insertSQL = `INSERT INTO workflows (` + columns + `) VALUES ($1, $2, $3, $4, $5, $6, $7, $8)`

	getSQL = `SELECT ` + columns + ` FROM workflows WHERE organization_id = $1 AND id = $2`

	getByNameSQL = `SELECT ` + columns + ` FROM workflows WHERE organization_id = $1 AND name = $2`

	lockSQL = `SELECT ` + columns + ` FROM workflows WHERE organization_id = $1 AND id = $2 FOR UPDATE`

	storeSQL = `UPDATE workflows SET name = $3, description = $4, version = $5, definition = $6, updated_at = $7
		WHERE organization_id = $1 AND id = $2`

	deleteSQL = `DELETE FROM workflows WHERE organization_id = $1 AND id = $2`

	listFirstSQL = `SELECT id, name, description, version, created_at, updated_at FROM workflows
		WHERE organization_id = $1
		ORDER BY created_at DESC, id DESC LIMIT $2`

	listAfterSQL = `SELECT id, name, description, version, created_at, updated_at FROM workflows
		WHERE organization_id = $1 AND (created_at, id) < ($3, $4)
		ORDER BY created_at DESC, id DESC LIMIT $2`
)

// Add stores a new workflow.
func (r *WorkflowRepository) Add(ctx context.Context, w *workflow.Workflow) error {
	def, err := w.Definition().MarshalJSON() // not json.Marshal, which would scan the output once more
	if err != nil {
		return fmt.Errorf("add workflow: %w", err)
	}
	_, err = r.pool.Exec(ctx, insertSQL, w.ID(), w.OrganizationID(), w.Name(), w.Description(), w.Version(), def, w.CreatedAt(), w.UpdatedAt())
	if err != nil {
		return fmt.Errorf("add workflow: %w", translate(err))
	}
	return nil
}

// Get returns a workflow by id.
func (r *WorkflowRepository) Get(ctx context.Context, organizationID, id string) (*workflow.Workflow, error) {
	w, err := scanWorkflow(r.pool.QueryRow(ctx, getSQL, organizationID, id))
	if err != nil {
		return nil, fmt.Errorf("get workflow %s: %w", id, err)
	}
	return w, nil
}

// GetByName returns a workflow by name.
func (r *WorkflowRepository) GetByName(ctx context.Context, organizationID, name string) (*workflow.Workflow, error) {
	w, err := scanWorkflow(r.pool.QueryRow(ctx, getByNameSQL, organizationID, name))
	if err != nil {
		return nil, fmt.Errorf("get workflow by name: %w", err)
	}
	return w, nil
}

// List returns a page of workflows, newest first.
func (r *WorkflowRepository) List(ctx context.Context, organizationID string, after *workflow.Position, limit int) ([]workflow.Summary, error) {
	var (
		rows pgx.Rows
		err  error
	)
	if after == nil {
		rows, err = r.pool.Query(ctx, listFirstSQL, organizationID, limit)
	} else {
		rows, err = r.pool.Query(ctx, listAfterSQL, organizationID, limit, after.CreatedAt, after.ID)
	}
	if err != nil {
		return nil, fmt.Errorf("list workflows: %w", err)
	}
	out, err := pgx.CollectRows(rows, func(row pgx.CollectableRow) (workflow.Summary, error) {
		var s workflow.Summary
		err := row.Scan(&s.ID, &s.Name, &s.Description, &s.Version, &s.CreatedAt, &s.UpdatedAt)
		s.CreatedAt, s.UpdatedAt = s.CreatedAt.UTC(), s.UpdatedAt.UTC()
		return s, err
	})
	if err != nil {
		return nil, fmt.Errorf("list workflows: %w", err)
	}
	return out, nil
}

// Update runs updateFunc under the workflow's row lock and stores its result when the version
// changed. Concurrent updates of one workflow run one after the other, each seeing the
// previous one's result: that makes an If-Match check inside updateFunc atomic with the write.
func (r *WorkflowRepository) Update(ctx context.Context, organizationID, id string, updateFunc func(ctx context.Context, w *workflow.Workflow) (*workflow.Workflow, error)) error {
	err := pgdb.InTx(ctx, r.pool, func(tx pgx.Tx) error {
		current, err := scanWorkflow(tx.QueryRow(ctx, lockSQL, organizationID, id))
		if err != nil {
			return err
		}
		loaded := current.Version()
		updated, err := updateFunc(ctx, current)
		if err != nil {
			return err
		}
		if updated == nil || updated.Version() == loaded {
			return nil
		}
		def, err := updated.Definition().MarshalJSON()
		if err != nil {
			return err
		}
		_, err = tx.Exec(ctx, storeSQL, organizationID, id, updated.Name(), updated.Description(), updated.Version(), def, updated.UpdatedAt())
		return translate(err)
	})
	if err != nil {
		return fmt.Errorf("update workflow %s: %w", id, err)
	}
	return nil
}

// Delete removes a workflow.
func (r *WorkflowRepository) Delete(ctx context.Context, organizationID, id string) error {
	tag, err := r.pool.Exec(ctx, deleteSQL, organizationID, id)
	if err != nil {
		return fmt.Errorf("delete workflow %s: %w", id, err)
	}
	if tag.RowsAffected() == 0 {
		return fmt.Errorf("delete workflow %s: %w", id, workflow.ErrNotFound)
	}
	return nil
}

func scanWorkflow(row pgx.Row) (*workflow.Workflow, error) {
	var (
		id, org, name, description string
		version                    int64
		raw                        []byte
		createdAt, updatedAt       time.Time
	)
	if err := row.Scan(&id, &org, &name, &description, &version, &raw, &createdAt, &updatedAt); err != nil {
		if errors.Is(err, pgx.ErrNoRows) {
			return nil, workflow.ErrNotFound
		}
		return nil, err
	}
	def, err := workflow.ParseDefinition(raw)
	if err != nil {
		return nil, err
	}
	return workflow.UnmarshalFromDatabase(id, org, name, description, version, def, createdAt.UTC(), updatedAt.UTC()), nil
}

// translate maps the name uniqueness violation onto the domain's error.
func translate(err error) error {
	var pgErr *pgconn.PgError
	if errors.As(err, &pgErr) && pgErr.Code == "23505" && pgErr.ConstraintName == "workflows_organization_id_name_key" {
		return workflow.ErrNameTaken
	}
	return err
}
