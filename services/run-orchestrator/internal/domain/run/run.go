// Package run models a run of the single runtime workflow svc-runtime: its states, the pinned
// definition it walks, the interpreter state that says where each block stands, and the rules
// that decide which block runs next.
package run

import (
	"errors"
	"fmt"
)

// Spec is the name of the one runtime workflow every run is an instance of.
const Spec = "svc-runtime"

// Status is a run's state: queued → running ⇄ waiting → completed | failed | cancelled.
type Status string

// The run states (docs/API.md, "Runs").
const (
	StatusQueued    Status = "queued"
	StatusRunning   Status = "running"
	StatusWaiting   Status = "waiting"
	StatusCompleted Status = "completed"
	StatusFailed    Status = "failed"
	StatusCancelled Status = "cancelled"
)

// Terminal reports whether s never changes again.
func (s Status) Terminal() bool {
	return s == StatusCompleted || s == StatusFailed || s == StatusCancelled
}

// Valid reports whether s is one of the run states.
func (s Status) Valid() bool {
	switch s {
	case StatusQueued, StatusRunning, StatusWaiting, StatusCompleted, StatusFailed, StatusCancelled:
		return true
	}
	return false
}

// Sentinel errors of the run aggregate; the HTTP and RPC ports map them once.
var (
	ErrNotFound         = errors.New("run not found")
	ErrWorkflowNotFound = errors.New("workflow not found")
)

// FinishedError says a terminal run was asked to change (cancel, signal): 409 run_finished.
type FinishedError struct{ Status Status }

func (e *FinishedError) Error() string { return fmt.Sprintf("run is already %s", e.Status) }

// InvalidWorkflowError says the pinned workflow has validation errors and cannot be run.
type InvalidWorkflowError struct{ Errors []ValidationError }

func (e *InvalidWorkflowError) Error() string {
	return fmt.Sprintf("workflow has %d validation error(s)", len(e.Errors))
}

// ValidationError is one problem of a definition as the editor reports it.
type ValidationError struct {
	Code       string `json:"code"`
	BlockID    string `json:"block_id,omitempty"`
	Message    string `json:"message"`
	Pointer    string `json:"pointer,omitempty"`
	DidYouMean string `json:"did_you_mean,omitempty"`
}

// InvalidInputError says the run input fails the trigger's input_schema.
// Reason, when set, says what else the input fails (a concurrency key that cannot be
// evaluated over it).
type InvalidInputError struct {
	Issues []Issue
	Reason string
}

func (e *InvalidInputError) Error() string {
	if e.Reason != "" {
		return e.Reason
	}
	return "run input does not match the trigger's input_schema"
}

// Issue is one place where the input fails the schema (JSON Pointer into the input).
type Issue struct {
	Path    string
	Message string
}
