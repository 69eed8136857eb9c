// Package schedule models a cron schedule of a workflow: its cron in an IANA timezone, when it
// fires next, and the fires a tick claims, each (schedule, cutoff) exactly once.
package schedule

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"time"
)

// ErrNotFound is a schedule that does not exist in the organization asked about.
var ErrNotFound = errors.New("schedule not found")

// ErrWorkflowNotFound is a workflow id the schedule's organization does not have.
var ErrWorkflowNotFound = errors.New("workflow not found")

// InvalidError is a field value the schedule refuses.
type InvalidError struct {
	Field   string
	Message string
}

func (e *InvalidError) Error() string { return fmt.Sprintf("schedule: %s: %s", e.Field, e.Message) }

// Schedule is one cron schedule of one organization.
type Schedule struct {
	id             string
	organizationID string
	workflowID     string
	cron           Cron
	input          json.RawMessage
	enabled        bool
	lastFiredAt    time.Time // zero: never fired
	nextFireAt     time.Time // zero: the cron never fires again
	createdAt      time.Time
	updatedAt      time.Time
}

// New returns a schedule that fires from its creation on.
func New(id, organizationID, workflowID string, cron Cron, input json.RawMessage, enabled bool, now time.Time) (*Schedule, error) {
	if id == "" || organizationID == "" || workflowID == "" {
		return nil, errors.New("schedule: id, organization and workflow are required")
	}
	input, err := checkInput(input)
	if err != nil {
		return nil, err
	}
	now = dbTime(now)
	s := &Schedule{id: id, organizationID: organizationID, workflowID: workflowID, cron: cron, input: input,
		enabled: enabled, createdAt: now, updatedAt: now}
	s.plan()
	return s, nil
}

// UnmarshalFromDatabase rebuilds a stored schedule. Only adapters call it; it is not a
// constructor and checks nothing.
func UnmarshalFromDatabase(id, organizationID, workflowID string, cron Cron, input json.RawMessage, enabled bool,
	lastFiredAt, nextFireAt, createdAt, updatedAt time.Time,
) *Schedule {
	return &Schedule{id: id, organizationID: organizationID, workflowID: workflowID, cron: cron, input: input,
		enabled: enabled, lastFiredAt: lastFiredAt, nextFireAt: nextFireAt, createdAt: createdAt, updatedAt: updatedAt}
}

func checkInput(input json.RawMessage) (json.RawMessage, error) {
	input = bytes.TrimSpace(input)
	if len(input) == 0 {
		return json.RawMessage("null"), nil
	}
	if !json.Valid(input) {
		return nil, &InvalidError{Field: "input", Message: "input must be a JSON value"}
	}
	return input, nil
}

// plan sets the next fire time: the first one after the last fire, or after creation.
func (s *Schedule) plan() {
	from := s.createdAt
	if !s.lastFiredAt.IsZero() {
		from = s.lastFiredAt
	}
	next, err := s.cron.Next(from)
	if err != nil {
		next = time.Time{}
	}
	s.nextFireAt = next
}

// Change is a partial update; nil members stay as they are.
type Change struct {
	WorkflowID *string
	Cron       *Cron
	Input      json.RawMessage // nil: unchanged; "null": set to null
	Enabled    *bool
}

// Apply changes the schedule. A new cron or timezone re-plans the next fire from the last
// fire (or creation), as for a new schedule.
func (s *Schedule) Apply(c Change, now time.Time) error {
	if c.Input != nil {
		in, err := checkInput(c.Input)
		if err != nil {
			return err
		}
		s.input = in
	}
	if c.WorkflowID != nil {
		s.workflowID = *c.WorkflowID
	}
	if c.Enabled != nil {
		s.enabled = *c.Enabled
	}
	if c.Cron != nil {
		s.cron = *c.Cron
		s.plan()
	}
	s.updatedAt = dbTime(now)
	return nil
}

// Fire is one claimed (schedule, cutoff): the record that makes it happen once, and while it
// is pending, the outbox entry a tick dispatches.
type Fire struct {
	ScheduleID     string
	Cutoff         time.Time
	OrganizationID string
	WorkflowID     string
	Input          json.RawMessage
	Attempts       int
}

// IdempotencyKey is the key the run is started with: a retried dispatch never starts a second run.
func (f Fire) IdempotencyKey() string {
	return "schedule:" + f.ScheduleID + ":" + f.Cutoff.UTC().Format("2006-01-02T15:04:05.000Z")
}

// Claim fires the schedule if it is due at now: the cutoff is the latest fire time at or
// before now (missed fires coalesce into it), last_fired_at becomes the cutoff and the next
// fire time moves past now. ok is false when it is not due.
func (s *Schedule) Claim(now time.Time) (f Fire, ok bool) {
	if !s.enabled || s.nextFireAt.IsZero() || s.nextFireAt.After(now) {
		return Fire{}, false
	}
	cutoff, following := s.cron.Cutoff(s.nextFireAt, now)
	s.lastFiredAt, s.nextFireAt = cutoff, following
	return Fire{ScheduleID: s.id, Cutoff: cutoff, OrganizationID: s.organizationID, WorkflowID: s.workflowID, Input: s.input}, true
}

// Outcome is what one dispatch attempt of a fire came to.
type Outcome struct {
	Fire Fire
	// RunID is set when the run exists (started now or by an earlier attempt).
	RunID string
	// Code is the failure's public code when there is no run: workflow_not_found,
	// workflow_invalid, invalid_body (final) or dispatch_failed (retried).
	Code    string
	Message string
}

// The failure codes of a fire.
const (
	CodeWorkflowNotFound = "workflow_not_found"
	CodeWorkflowInvalid  = "workflow_invalid"
	CodeInvalidInput     = "invalid_body"
	CodeDispatchFailed   = "dispatch_failed"
)

// Dispatched reports a run was started.
func (o Outcome) Dispatched() bool { return o.RunID != "" }

// Retry reports the fire stays in the outbox for a later tick.
func (o Outcome) Retry() bool { return o.RunID == "" && o.Code == CodeDispatchFailed }

// DisablesSchedule reports the schedule cannot fire any more: its workflow is gone.
func (o Outcome) DisablesSchedule() bool { return o.Code == CodeWorkflowNotFound }

// RetryDelay is how long a fire whose dispatch failed waits before the next attempt: 1 s,
// doubling per attempt, at most 30 s.
func RetryDelay(attempts int) time.Duration {
	d := time.Second
	for i := 1; i < attempts && d < 30*time.Second; i++ {
		d *= 2
	}
	return min(d, 30*time.Second)
}

// Getters.

// ID is the schedule's id.
func (s *Schedule) ID() string { return s.id }

// OrganizationID owns the schedule.
func (s *Schedule) OrganizationID() string { return s.organizationID }

// WorkflowID is the workflow it runs.
func (s *Schedule) WorkflowID() string { return s.workflowID }

// Cron is its cron and timezone.
func (s *Schedule) Cron() Cron { return s.cron }

// Input is the run input, JSON.
func (s *Schedule) Input() json.RawMessage { return s.input }

// Enabled says whether it fires.
func (s *Schedule) Enabled() bool { return s.enabled }

// LastFiredAt is the last cutoff claimed; zero when it never fired.
func (s *Schedule) LastFiredAt() time.Time { return s.lastFiredAt }

// NextFireAt is when it is due next; zero when the cron never fires again.
func (s *Schedule) NextFireAt() time.Time { return s.nextFireAt }

// CreatedAt is when it was created.
func (s *Schedule) CreatedAt() time.Time { return s.createdAt }

// UpdatedAt is when a client last changed it.
func (s *Schedule) UpdatedAt() time.Time { return s.updatedAt }

// dbTime is t as Postgres keeps it: UTC, microseconds.
func dbTime(t time.Time) time.Time { return t.UTC().Truncate(time.Microsecond) }
