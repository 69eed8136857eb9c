// Package app holds run-orchestrator's use cases: commands that start, cancel and signal runs
// (public route and internal RPC alike), and queries that read runs, their logs and their
// events. The engine that drives runs is app/engine; the ports the use cases drive are in
// app/port.
package app

import (
	"go.opentelemetry.io/otel/metric"

	"svc.dev/services/run-orchestrator/internal/app/command"
	"svc.dev/services/run-orchestrator/internal/app/port"
	"svc.dev/services/run-orchestrator/internal/app/query"
)

// Application is every use case of the service.
type Application struct {
	Commands Commands
	Queries  Queries
}

// Commands start, cancel and signal runs.
type Commands struct {
	// StartRuns is the batch start (the internal RPC's), StartRun one start sharing its
	// batches with the others in flight.
	StartRuns command.StartRunsHandler
	StartRun  *command.StartGroup
	CancelRun command.CancelRunHandler
	SignalRun command.SignalRunHandler
	// SetRetention sets an organization's own retention period; SweepRetention deletes the
	// finished runs past their period (every replica runs it in the background).
	SetRetention   command.SetRetentionHandler
	SweepRetention command.SweepRetentionHandler
}

// Queries read runs, their logs and events, and an organization's run statuses.
type Queries struct {
	ListRuns    query.ListRunsHandler
	Runs        query.Runs
	RunEvents   query.RunEvents
	OrgStatuses query.OrgStatuses
	Retention   query.Retention
}

// Config is what the use cases are built from: the ports, and the start's options.
type Config struct {
	Catalog     port.WorkflowCatalog
	Engine      port.Engine
	Reader      port.RunReader
	Snapshots   port.SnapshotReader
	Waker       port.Waker
	OrgStatuses port.OrgStatusReader
	Retention   port.RetentionStore
	// Sweep paces the retention sweep; Sweep.Server is the server's period.
	Sweep command.SweepConfig
	// Cache, when set, shares prepared workflow snapshots between starts.
	Cache *command.SnapshotCache
	// StartSlots bounds the start batches in flight (0: command.DefaultStartSlots).
	StartSlots int
	// Meter counts the runs started (nil: not counted).
	Meter metric.MeterProvider
}

// New wires the use cases.
func New(cfg Config) (Application, error) {
	batch := command.NewStartRunsHandler(cfg.Catalog, cfg.Engine)
	if cfg.Cache != nil {
		batch = batch.WithCache(cfg.Cache)
	}
	if cfg.Meter != nil {
		batch = batch.WithMeter(cfg.Meter)
	}
	slots := cfg.StartSlots
	if slots <= 0 {
		slots = command.DefaultStartSlots
	}
	sweep, err := command.NewSweepRetentionHandler(cfg.Retention, cfg.Sweep)
	if err != nil {
		return Application{}, err
	}
	return Application{
		Commands: Commands{
			StartRuns: batch,
			StartRun:  command.NewStartGroup(batch, slots),
			CancelRun: command.NewCancelRunHandler(cfg.Engine),
			SignalRun: command.NewSignalRunHandler(cfg.Engine),

			SetRetention:   command.NewSetRetentionHandler(cfg.Retention, cfg.Sweep.Server),
			SweepRetention: sweep,
		},
		Queries: Queries{
			ListRuns:    query.NewListRunsHandler(cfg.Reader, cfg.Catalog),
			Runs:        query.NewRuns(cfg.Reader),
			RunEvents:   query.NewRunEvents(cfg.Snapshots, cfg.Waker),
			OrgStatuses: query.NewOrgStatuses(cfg.OrgStatuses),
			Retention:   query.NewRetention(cfg.Retention, cfg.Sweep.Server),
		},
	}, nil
}
