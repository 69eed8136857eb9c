// Package workflow is the workflow aggregate: a workflow's name, description and version
// (what If-Match checks), its definition of blocks and edges, the edit operations and the
// outcome of a batch of them (each skipped with a reason when it cannot apply), the
// validation errors of a definition, and the Repository port. Applying operations and
// validating a definition need the connector catalog, which the aggregate takes as an
// Applier.
package workflow

import (
	"errors"
	"fmt"
	"strings"
	"time"
	"unicode/utf8"
)

// Limits of a workflow's text fields.
const (
	MaxNameLength        = 200
	MaxDescriptionLength = 4000
)

// ErrNotFound is a workflow that does not exist in the organization asked about.
var ErrNotFound = errors.New("workflow not found")

// ErrNameTaken is a name another workflow of the organization already has.
var ErrNameTaken = errors.New("workflow name taken")

// VersionMismatchError is an If-Match that names another version than the current one.
type VersionMismatchError struct{ Expected, Current int64 }

func (e *VersionMismatchError) Error() string {
	return fmt.Sprintf("workflow: version %d expected, current is %d", e.Expected, e.Current)
}

// InvalidError is a field value the workflow refuses.
type InvalidError struct {
	Field   string
	Message string
}

func (e *InvalidError) Error() string { return fmt.Sprintf("workflow: %s: %s", e.Field, e.Message) }

// Workflow is one workflow of one organization.
type Workflow struct {
	id             string
	organizationID string
	name           string
	description    string
	version        int64
	definition     Definition
	createdAt      time.Time
	updatedAt      time.Time
}

// New returns a workflow at version 1 with an empty definition.
func New(id, organizationID, name, description string, now time.Time) (*Workflow, error) {
	if id == "" || organizationID == "" {
		return nil, errors.New("workflow: id and organization are required")
	}
	if err := checkName(name); err != nil {
		return nil, err
	}
	if err := checkDescription(description); err != nil {
		return nil, err
	}
	now = dbTime(now)
	return &Workflow{id: id, organizationID: organizationID, name: name, description: description,
		version: 1, definition: Definition{}, createdAt: now, updatedAt: now}, nil
}

// NewWithDefinition returns a workflow at version 1 whose definition is ops applied to an empty
// one (a create with a definition), and the outcome of the ops. Skipped ops do not stop the
// creation, and the version stays 1 whatever the ops do: a new workflow has one version.
func NewWithDefinition(id, organizationID, name, description string, applier Applier, ops []Op, now time.Time) (*Workflow, Outcome, error) {
	w, err := New(id, organizationID, name, description, now)
	if err != nil {
		return nil, Outcome{}, err
	}
	out := applier.Apply(w.definition, ops)
	w.definition = out.Definition
	return w, out, nil
}

// UnmarshalFromDatabase rebuilds a stored workflow. Only adapters call it: it checks nothing.
func UnmarshalFromDatabase(id, organizationID, name, description string, version int64, def Definition, createdAt, updatedAt time.Time) *Workflow {
	return &Workflow{id: id, organizationID: organizationID, name: name, description: description,
		version: version, definition: def, createdAt: createdAt, updatedAt: updatedAt}
}

// ID is the workflow's id (wf_...).
func (w *Workflow) ID() string { return w.id }

// OrganizationID is the organization that owns the workflow.
func (w *Workflow) OrganizationID() string { return w.organizationID }

// Name is unique within the organization.
func (w *Workflow) Name() string { return w.name }

// Description is free text.
func (w *Workflow) Description() string { return w.description }

// Version grows by one with every change.
func (w *Workflow) Version() int64 { return w.version }

// Definition is the workflow's graph.
func (w *Workflow) Definition() Definition { return w.definition }

// CreatedAt is when the workflow was created.
func (w *Workflow) CreatedAt() time.Time { return w.createdAt }

// UpdatedAt is when the workflow last changed.
func (w *Workflow) UpdatedAt() time.Time { return w.updatedAt }

// CheckVersion compares an If-Match version with the current one; nil expected means none was
// sent.
func (w *Workflow) CheckVersion(expected *int64) error {
	if expected != nil && *expected != w.version {
		return &VersionMismatchError{Expected: *expected, Current: w.version}
	}
	return nil
}

// Describe changes the name and/or the description (nil leaves one as it is). Any change
// that was asked for bumps the version, even to the same value: the request was applied.
func (w *Workflow) Describe(name, description *string, now time.Time) error {
	if name == nil && description == nil {
		return nil
	}
	if name != nil {
		if err := checkName(*name); err != nil {
			return err
		}
	}
	if description != nil {
		if err := checkDescription(*description); err != nil {
			return err
		}
	}
	if name != nil {
		w.name = *name
	}
	if description != nil {
		w.description = *description
	}
	w.bump(now)
	return nil
}

// Edit applies a batch of operations. The version grows by exactly one when at least one
// operation applied, and not otherwise.
func (w *Workflow) Edit(applier Applier, ops []Op, now time.Time) Outcome {
	out := applier.Apply(w.definition, ops)
	if out.Applied > 0 {
		w.definition = out.Definition
		w.bump(now)
	}
	return out
}

func (w *Workflow) bump(now time.Time) {
	w.version++
	w.updatedAt = dbTime(now)
	if !w.updatedAt.After(w.createdAt) {
		w.updatedAt = w.createdAt
	}
}

// dbTime keeps what Postgres keeps: microseconds, UTC.
func dbTime(t time.Time) time.Time { return t.UTC().Truncate(time.Microsecond) }

func checkName(name string) error {
	n := utf8.RuneCountInString(name)
	switch {
	case strings.TrimSpace(name) == "":
		return &InvalidError{Field: "name", Message: "name must not be empty or blank"}
	case n > MaxNameLength:
		return &InvalidError{Field: "name", Message: fmt.Sprintf("name must be 1 to %d characters, not %d", MaxNameLength, n)}
	case strings.ContainsRune(name, 0):
		return &InvalidError{Field: "name", Message: "name must not contain the NUL character"}
	}
	return nil
}

func checkDescription(d string) error {
	n := utf8.RuneCountInString(d)
	switch {
	case n > MaxDescriptionLength:
		return &InvalidError{Field: "description", Message: fmt.Sprintf("description must be at most %d characters, not %d", MaxDescriptionLength, n)}
	case strings.ContainsRune(d, 0):
		return &InvalidError{Field: "description", Message: "description must not contain the NUL character"}
	}
	return nil
}
