// Package app holds scheduler's use cases: commands that change schedules and fire them, and
// queries that read them, each a small handler over the domain and the ports.
package app

import (
	"log/slog"
	"time"

	"svc.dev/services/scheduler/internal/app/command"
	"svc.dev/services/scheduler/internal/app/port"
	"svc.dev/services/scheduler/internal/app/query"
	"svc.dev/services/scheduler/internal/domain/schedule"
)

// Application is every use case of the service.
type Application struct {
	Commands Commands
	Queries  Queries
}

// Commands change schedules and fire them.
type Commands struct {
	CreateSchedule command.CreateScheduleHandler
	UpdateSchedule command.UpdateScheduleHandler
	DeleteSchedule command.DeleteScheduleHandler
	Tick           command.TickHandler
}

// Queries read schedules.
type Queries struct {
	GetSchedule   query.GetScheduleHandler
	ListSchedules query.ListSchedulesHandler
	PreviewCron   query.PreviewCronHandler
}

// New wires the use cases; now is the clock.
func New(repo schedule.Repository, queue schedule.FireQueue, workflows port.Workflows, dispatcher port.Dispatcher,
	tick command.TickConfig, now func() time.Time, log *slog.Logger,
) Application {
	return Application{
		Commands: Commands{
			CreateSchedule: command.NewCreateScheduleHandler(repo, workflows, now),
			UpdateSchedule: command.NewUpdateScheduleHandler(repo, workflows, now),
			DeleteSchedule: command.NewDeleteScheduleHandler(repo),
			Tick:           command.NewTickHandler(queue, dispatcher, tick, now, log),
		},
		Queries: Queries{
			GetSchedule:   query.NewGetScheduleHandler(repo),
			ListSchedules: query.NewListSchedulesHandler(repo, workflows),
			PreviewCron:   query.NewPreviewCronHandler(now),
		},
	}
}
