package app_test

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"testing"

	"github.com/jackc/pgx/v5/pgconn"
	"github.com/stretchr/testify/require"

	"svc.dev/services/run-orchestrator/internal/app/command"
	"svc.dev/services/run-orchestrator/internal/app/port"
	"svc.dev/services/run-orchestrator/internal/app/query"
	"svc.dev/services/run-orchestrator/internal/domain/run"
)

// storeDown is a reader and an engine whose Postgres answers "the database system is shutting
// down", as during a restart.
type storeDown struct{ port.Engine }

var errShuttingDown = fmt.Errorf("get run: %w", &pgconn.PgError{Code: "57P03", Message: "the database system is shutting down"})

func (storeDown) Get(context.Context, string, string) (run.Record, error) {
	return run.Record{}, errShuttingDown
}

func (storeDown) List(context.Context, string, run.ListFilter, int64) (port.RunPage, error) {
	return port.RunPage{}, errShuttingDown
}

func (storeDown) Logs(context.Context, string, string, int64, int, int64) ([]run.Attempt, error) {
	return nil, errShuttingDown
}

func (storeDown) WaitingForWorker(context.Context, string, string) (*run.Queued, error) {
	return nil, errShuttingDown
}

func (storeDown) Cancel(context.Context, string, string) (run.Status, error) {
	return "", errShuttingDown
}

func (storeDown) Signal(context.Context, string, string, string, json.RawMessage) (run.SignalResult, error) {
	return run.SignalResult{}, errShuttingDown
}

// TestRunsStoreUnavailable: reads, cancel and signals that fail because Postgres cannot be
// reached are *UnavailableError (503, clients retry), not internal errors or cancel_failed
// (the chaos suite saw 500s while Postgres restarted).
func TestRunsStoreUnavailable(t *testing.T) {
	t.Parallel()
	runs := query.NewRuns(storeDown{})
	cancel, signal := command.NewCancelRunHandler(storeDown{}), command.NewSignalRunHandler(storeDown{})
	var ue *port.UnavailableError
	_, err := runs.Get(context.Background(), "org", "run_x")
	require.ErrorAs(t, err, &ue)
	_, err = runs.Logs(context.Background(), "org", "run_x", 0, 10, port.PageBytes)
	require.ErrorAs(t, err, &ue)
	_, err = runs.WaitingForWorker(context.Background(), "org", "run_x")
	require.ErrorAs(t, err, &ue)
	_, err = cancel.Handle(context.Background(), command.CancelRun{OrganizationID: "org", RunID: "run_x"})
	require.ErrorAs(t, err, &ue)
	var ce *port.CancelError
	require.False(t, errors.As(err, &ce))
	_, err = signal.Handle(context.Background(), command.SignalRun{OrganizationID: "org", RunID: "run_x", Name: "go"})
	require.ErrorAs(t, err, &ue)
}
