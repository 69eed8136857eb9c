package port

import (
	"errors"
	"fmt"

	"svc.dev/libs/pgdb"
	"svc.dev/services/run-orchestrator/internal/domain/run"
)

// DispatchError is a failure before the run was durably stored: 500 dispatch_failed.
type DispatchError struct {
	Message string
	Err     error
}

func (e *DispatchError) Error() string { return fmt.Sprintf("dispatch: %s: %v", e.Message, e.Err) }
func (e *DispatchError) Unwrap() error { return e.Err }

// UnavailableError is a peer that could not answer (the editor, the run store): 503 unavailable.
type UnavailableError struct {
	Message string
	Err     error
}

func (e *UnavailableError) Error() string { return fmt.Sprintf("%s: %v", e.Message, e.Err) }
func (e *UnavailableError) Unwrap() error { return e.Err }

// CancelError is an engine failure while cancelling: 500 cancel_failed.
type CancelError struct{ Err error }

func (e *CancelError) Error() string { return fmt.Sprintf("cancel: %v", e.Err) }
func (e *CancelError) Unwrap() error { return e.Err }

// IsDomain reports whether err is an answer for the caller rather than a failure.
func IsDomain(err error) bool {
	var fe *run.FinishedError
	return errors.Is(err, run.ErrNotFound) || errors.As(err, &fe)
}

// StoreError is err, or an *UnavailableError when it says the run store cannot be reached.
func StoreError(err error) error {
	if err != nil && !IsDomain(err) && pgdb.Unavailable(err) {
		return &UnavailableError{Message: "the run store is unavailable", Err: err}
	}
	return err
}
