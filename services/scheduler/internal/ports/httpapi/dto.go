package httpapi

import (
	"encoding/json"
	"time"

	"svc.dev/libs/wire"
	"svc.dev/services/scheduler/internal/app/command"
	"svc.dev/services/scheduler/internal/domain/schedule"
)

// createRequest is the body of POST /api/schedules.
type createRequest struct {
	WorkflowID *string         `json:"workflowId"`
	Cron       *string         `json:"cron"`
	Timezone   *string         `json:"timezone"`
	Input      json.RawMessage `json:"input"`
	Enabled    *bool           `json:"enabled"`
}

// updateRequest is the body of PATCH /api/schedules/:id; absent members stay as they are.
type updateRequest struct {
	WorkflowID *string         `json:"workflowId"`
	Cron       *string         `json:"cron"`
	Timezone   *string         `json:"timezone"`
	Input      json.RawMessage `json:"input"`
	Enabled    *bool           `json:"enabled"`
}

// scheduleJSON is a schedule as the API shows it (docs/API.md, Schedules).
type scheduleJSON struct {
	ID          string          `json:"id"`
	WorkflowID  string          `json:"workflowId"`
	Cron        string          `json:"cron"`
	Timezone    string          `json:"timezone"`
	Input       json.RawMessage `json:"input"`
	Enabled     bool            `json:"enabled"`
	LastFiredAt wire.Time       `json:"lastFiredAt"`
	NextFireAt  wire.Time       `json:"nextFireAt"`
	CreatedAt   wire.Time       `json:"createdAt"`
	UpdatedAt   wire.Time       `json:"updatedAt"`
}

// toScheduleJSON: a disabled schedule has no next fire (null).
func toScheduleJSON(s *schedule.Schedule) scheduleJSON {
	out := scheduleJSON{
		ID: s.ID(), WorkflowID: s.WorkflowID(), Cron: s.Cron().Expr(), Timezone: s.Cron().Timezone(),
		Input: s.Input(), Enabled: s.Enabled(), LastFiredAt: wire.NewTime(s.LastFiredAt()),
		CreatedAt: wire.NewTime(s.CreatedAt()), UpdatedAt: wire.NewTime(s.UpdatedAt()),
	}
	if s.Enabled() {
		out.NextFireAt = wire.NewTime(s.NextFireAt())
	}
	if len(out.Input) == 0 {
		out.Input = json.RawMessage("null")
	}
	return out
}

type listResponse struct {
	Items      []scheduleJSON `json:"items"`
	NextCursor *string        `json:"nextCursor"`
}

// previewResponse is the answer of GET /api/schedules/preview.
type previewResponse struct {
	Next []string `json:"next"`
}

// toPreviewResponse writes each fire time as every time of the API is written.
func toPreviewResponse(next []time.Time) previewResponse {
	out := previewResponse{Next: make([]string, len(next))}
	for i, t := range next {
		out.Next[i] = wire.FormatTime(t)
	}
	return out
}

type firedJSON struct {
	ScheduleID string `json:"scheduleId"`
	Cutoff     string `json:"cutoff"`
	RunID      string `json:"runId"`
}

type failedJSON struct {
	ScheduleID string `json:"scheduleId"`
	Cutoff     string `json:"cutoff"`
	Error      string `json:"error"`
}

type tickResponse struct {
	Claimed int          `json:"claimed"`
	Fired   []firedJSON  `json:"fired"`
	Failed  []failedJSON `json:"failed"`
}

// toTickResponse counts and lists what concerns org only ("" counts and lists all): the tick
// runs for every organization, but an organization never learns of another's schedules, runs
// or load, not even how many schedules were due.
func toTickResponse(res command.TickResult, org string) tickResponse {
	claimed := res.Claimed
	if org != "" {
		claimed = res.ClaimedBy[org]
	}
	out := tickResponse{Claimed: claimed, Fired: []firedJSON{}, Failed: []failedJSON{}}
	for _, o := range res.Fired {
		if org == "" || o.Fire.OrganizationID == org {
			out.Fired = append(out.Fired, firedJSON{ScheduleID: o.Fire.ScheduleID, Cutoff: wire.FormatTime(o.Fire.Cutoff), RunID: o.RunID})
		}
	}
	for _, o := range res.Failed {
		if org == "" || o.Fire.OrganizationID == org {
			out.Failed = append(out.Failed, failedJSON{ScheduleID: o.Fire.ScheduleID, Cutoff: wire.FormatTime(o.Fire.Cutoff), Error: o.Code})
		}
	}
	return out
}
