package mcptools

import (
	"context"
	"encoding/json"
	"strings"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	api "svc.dev/clients/apiclient"
)

// SchedulesListInput filters and pages schedules.
type SchedulesListInput struct {
	WorkflowID string `json:"workflow_id,omitempty" jsonschema:"only this workflow's schedules"`
	After      string `json:"after,omitempty" jsonschema:"next_cursor of the previous page"`
	Limit      int    `json:"limit,omitempty" jsonschema:"page size, 1-500 (default 50)"`
}

// SchedulesListOutput is one page of the organization's schedules.
type SchedulesListOutput struct {
	Schedules  []api.Schedule `json:"schedules"`
	NextCursor *string        `json:"next_cursor" jsonschema:"pass as after for the next page; null after the last"`
}

// SchedulesCreateInput is a new schedule.
type SchedulesCreateInput struct {
	WorkflowID string `json:"workflow_id" jsonschema:"the workflow to run (wf_...)"`
	Cron       string `json:"cron" jsonschema:"5 fields (minute hour day-of-month month day-of-week) or a descriptor such as @hourly"`
	Timezone   string `json:"timezone,omitempty" jsonschema:"IANA time zone, default UTC"`
	Input      any    `json:"input,omitempty" jsonschema:"the input of every run it starts"`
	Enabled    *bool  `json:"enabled,omitempty" jsonschema:"default true"`
}

// SchedulesUpdateInput changes the members it names.
type SchedulesUpdateInput struct {
	ScheduleID string  `json:"schedule_id" jsonschema:"the schedule's id (sch_...)"`
	Cron       *string `json:"cron,omitempty"`
	Timezone   *string `json:"timezone,omitempty"`
	Input      any     `json:"input,omitempty" jsonschema:"the input of every run it starts"`
	Enabled    *bool   `json:"enabled,omitempty"`
}

// ScheduleRef names a schedule.
type ScheduleRef struct {
	ScheduleID string `json:"schedule_id" jsonschema:"the schedule's id (sch_...)"`
}

func (t *tools) addScheduleTools(s *mcp.Server) {
	mcp.AddTool(s, &mcp.Tool{
		Name: "schedules_list", Title: "List schedules", Annotations: readOnly(),
		Description: "Lists the organization's schedules (cron, timezone, input, enabled, lastFiredAt, nextFireAt), optionally of one workflow, one page at a time; page with after = next_cursor.",
	}, t.schedulesList)
	mcp.AddTool(s, &mcp.Tool{
		Name: "schedules_create", Title: "Create a schedule",
		Description: "Schedules runs of a workflow on a cron in a time zone. A bad cron answers invalid_cron with the reason.",
	}, t.schedulesCreate)
	mcp.AddTool(s, &mcp.Tool{
		Name: "schedules_update", Title: "Update a schedule",
		Description: "Changes a schedule's cron, timezone, input or enabled; members left out stay as they are.",
	}, t.schedulesUpdate)
	mcp.AddTool(s, &mcp.Tool{
		Name: "schedules_delete", Title: "Delete a schedule",
		Annotations: &mcp.ToolAnnotations{DestructiveHint: ptr(true), IdempotentHint: true},
		Description: "Deletes a schedule; runs it started are unaffected.",
	}, t.schedulesDelete)
}

func (t *tools) schedulesList(ctx context.Context, req *mcp.CallToolRequest, in SchedulesListInput) (*mcp.CallToolResult, SchedulesListOutput, error) {
	p, err := t.who(ctx, req.Extra)
	if err != nil {
		return nil, SchedulesListOutput{}, err
	}
	page, err := boundedPage(in.Limit, func(limit int) (*api.Page, error) {
		return p.Client.ListSchedulesPage(ctx, p.Key, in.WorkflowID, in.After, limit)
	})
	if err != nil {
		return nil, SchedulesListOutput{}, toolError(err)
	}
	out := SchedulesListOutput{Schedules: make([]api.Schedule, 0, len(page.Items)), NextCursor: page.NextCursor}
	for _, r := range page.Items {
		s, err := api.Decode[api.Schedule](r)
		if err != nil {
			return nil, SchedulesListOutput{}, toolError(err)
		}
		out.Schedules = append(out.Schedules, s)
	}
	return nil, out, nil
}

func (t *tools) schedulesCreate(ctx context.Context, req *mcp.CallToolRequest, in SchedulesCreateInput) (*mcp.CallToolResult, api.Schedule, error) {
	p, err := t.who(ctx, req.Extra)
	if err != nil {
		return nil, api.Schedule{}, err
	}
	body := api.CreateScheduleRequest{WorkflowID: in.WorkflowID, Cron: in.Cron, Timezone: in.Timezone, Enabled: in.Enabled}
	if in.Input != nil {
		if body.Input, err = json.Marshal(in.Input); err != nil {
			return nil, api.Schedule{}, invalidArgument("input: " + err.Error())
		}
	}
	raw, err := p.Client.CreateSchedule(ctx, p.Key, body)
	if err != nil {
		return nil, api.Schedule{}, toolError(err)
	}
	s, err := api.Decode[api.Schedule](raw)
	return nil, s, toolErrorOrNil(err)
}

func (t *tools) schedulesUpdate(ctx context.Context, req *mcp.CallToolRequest, in SchedulesUpdateInput) (*mcp.CallToolResult, api.Schedule, error) {
	if strings.TrimSpace(in.ScheduleID) == "" {
		return nil, api.Schedule{}, invalidArgument("schedule_id is empty")
	}
	p, err := t.who(ctx, req.Extra)
	if err != nil {
		return nil, api.Schedule{}, err
	}
	patch := map[string]any{}
	if in.Cron != nil {
		patch["cron"] = *in.Cron
	}
	if in.Timezone != nil {
		patch["timezone"] = *in.Timezone
	}
	if in.Input != nil {
		patch["input"] = in.Input
	}
	if in.Enabled != nil {
		patch["enabled"] = *in.Enabled
	}
	body, err := json.Marshal(patch)
	if err != nil {
		return nil, api.Schedule{}, invalidArgument(err.Error())
	}
	raw, err := p.Client.UpdateSchedule(ctx, p.Key, in.ScheduleID, body)
	if err != nil {
		return nil, api.Schedule{}, toolError(err)
	}
	s, err := api.Decode[api.Schedule](raw)
	return nil, s, toolErrorOrNil(err)
}

func (t *tools) schedulesDelete(ctx context.Context, req *mcp.CallToolRequest, in ScheduleRef) (*mcp.CallToolResult, Deleted, error) {
	if strings.TrimSpace(in.ScheduleID) == "" {
		return nil, Deleted{}, invalidArgument("schedule_id is empty")
	}
	p, err := t.who(ctx, req.Extra)
	if err != nil {
		return nil, Deleted{}, err
	}
	if err := p.Client.DeleteSchedule(ctx, p.Key, in.ScheduleID); err != nil {
		return nil, Deleted{}, toolError(err)
	}
	return nil, Deleted{ID: in.ScheduleID, Deleted: true}, nil
}
