package query

import (
	"time"

	"svc.dev/services/scheduler/internal/domain/schedule"
)

// PreviewCount is how many fire times a preview lists.
const PreviewCount = 5

// PreviewCron asks when a cron in a timezone would fire next, before any schedule has it.
type PreviewCron struct {
	Cron     string
	Timezone string // "" means UTC, as on a schedule
}

// PreviewCronHandler handles PreviewCron with the parsing and the fire times a schedule uses
// (schedule.ParseCron, Cron.Next), so what it shows is what the ticks will do.
type PreviewCronHandler struct{ now func() time.Time }

// NewPreviewCronHandler returns the handler; now is the clock.
func NewPreviewCronHandler(now func() time.Time) PreviewCronHandler {
	if now == nil {
		panic("nil clock")
	}
	return PreviewCronHandler{now: now}
}

// Handle returns the next PreviewCount fire times after now, or the cron's
// *schedule.InvalidCronError.
func (h PreviewCronHandler) Handle(q PreviewCron) ([]time.Time, error) {
	c, err := schedule.ParseCron(q.Cron, q.Timezone)
	if err != nil {
		return nil, err
	}
	return c.Upcoming(h.now(), PreviewCount), nil
}
