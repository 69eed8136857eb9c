package httpapi

import (
	"context"
	"errors"
	"io"
	"net/http"
	"strings"
	"time"

	"github.com/gorilla/mux"

	"svc.dev/libs/internalauth"
	"svc.dev/libs/web"
	"svc.dev/libs/wire"
	"svc.dev/proto/errs"
	"svc.dev/services/scheduler/internal/app"
	"svc.dev/services/scheduler/internal/app/command"
	"svc.dev/services/scheduler/internal/app/query"
	"svc.dev/services/scheduler/internal/domain/schedule"
)

type handlers struct{ app app.Application }

// listRule is the cursor rule of GET /api/schedules.
func listRule() wire.PageRule { return wire.ListRule("schedules") }

// organization is the caller's organization from the signed identity.
func organization(r *http.Request) (string, error) { return internalauth.Organization(r.Context()) }

// scheduleID is the {id} of the path; a string no schedule id can be is not_found at once.
func scheduleID(r *http.Request) (string, error) {
	id := mux.Vars(r)["id"]
	if !wire.ValidID(wire.Schedule, id) {
		return "", schedule.ErrNotFound
	}
	return id, nil
}

func (h handlers) createSchedule(w http.ResponseWriter, r *http.Request) error {
	org, err := organization(r)
	if err != nil {
		return err
	}
	var req createRequest
	if err := web.Decode(r, &req); err != nil {
		return err
	}
	var issues []wire.Issue
	if req.WorkflowID == nil {
		issues = append(issues, wire.Issue{Path: "/workflowId", Message: "workflowId is required: the id of a workflow of your organization (wf_...)"})
	}
	if req.Cron == nil {
		issues = append(issues, wire.Issue{Path: "/cron", Message: `cron is required: 5 fields such as "30 2 * * *", or a descriptor such as @daily`})
	}
	if len(issues) > 0 {
		return web.InvalidBody(issues...)
	}
	cmd := command.CreateSchedule{OrganizationID: org, WorkflowID: *req.WorkflowID, Cron: *req.Cron, Input: req.Input, Enabled: true}
	if req.Timezone != nil {
		cmd.Timezone = *req.Timezone
	}
	if req.Enabled != nil {
		cmd.Enabled = *req.Enabled
	}
	s, err := h.app.Commands.CreateSchedule.Handle(r.Context(), cmd)
	if err != nil {
		return err
	}
	web.WriteJSON(w, http.StatusCreated, toScheduleJSON(s))
	return nil
}

func (h handlers) listSchedules(w http.ResponseWriter, r *http.Request) error {
	org, err := organization(r)
	if err != nil {
		return err
	}
	// A cursor resumes this organization's list under this filter only: under another filter
	// its position would skip that list's newer schedules.
	rule := listRule().Scoped(org, r.URL.Query().Get("workflowId"))
	page, err := rule.ParsePage(r.URL.Query())
	if err != nil {
		return err
	}
	_, filtered := r.URL.Query()["workflowId"]
	q := query.ListSchedules{OrganizationID: org, Limit: page.Limit, WorkflowID: r.URL.Query().Get("workflowId"), Filtered: filtered}
	if page.After != nil {
		pos, ok := toPosition(page.After)
		if !ok {
			return &wire.PageError{Message: "after must be a nextCursor returned by this list"}
		}
		q.After = &pos
	}
	out := listResponse{Items: []scheduleJSON{}}
	res, err := h.app.Queries.ListSchedules.Handle(r.Context(), q)
	if err != nil {
		return err
	}
	for _, s := range res.Items {
		out.Items = append(out.Items, toScheduleJSON(s))
	}
	if res.Next != nil {
		c := rule.EncodeCursor(res.Next.CreatedAt.UTC().Format(time.RFC3339Nano), res.Next.ID)
		out.NextCursor = &c
	}
	web.WriteJSON(w, http.StatusOK, out)
	return nil
}

// toPosition reads the (created_at, id) a cursor carries.
func toPosition(p []string) (schedule.Position, bool) {
	if len(p) != 2 {
		return schedule.Position{}, false
	}
	t, err := time.Parse(time.RFC3339Nano, p[0])
	if err != nil || !wire.ValidID(wire.Schedule, p[1]) {
		return schedule.Position{}, false
	}
	return schedule.Position{CreatedAt: t, ID: p[1]}, true
}

// previewSchedule is GET /api/schedules/preview?cron=&timezone=: the next fire times of a
// cron, parsed and planned as a schedule's would be, so a person sees them before saving. It
// reads nothing stored; an invalid cron or timezone is 400 invalid_cron with its message.
func (h handlers) previewSchedule(w http.ResponseWriter, r *http.Request) error {
	if _, err := organization(r); err != nil {
		return err
	}
	q := r.URL.Query()
	next, err := h.app.Queries.PreviewCron.Handle(query.PreviewCron{Cron: q.Get("cron"), Timezone: q.Get("timezone")})
	if err != nil {
		return err
	}
	web.WriteJSON(w, http.StatusOK, toPreviewResponse(next))
	return nil
}

func (h handlers) getSchedule(w http.ResponseWriter, r *http.Request) error {
	org, err := organization(r)
	if err != nil {
		return err
	}
	id, err := scheduleID(r)
	if err != nil {
		return err
	}
	s, err := h.app.Queries.GetSchedule.Handle(r.Context(), query.GetSchedule{OrganizationID: org, ID: id})
	if err != nil {
		return err
	}
	web.WriteJSON(w, http.StatusOK, toScheduleJSON(s))
	return nil
}

func (h handlers) updateSchedule(w http.ResponseWriter, r *http.Request) error {
	org, err := organization(r)
	if err != nil {
		return err
	}
	id, err := scheduleID(r)
	if err != nil {
		return err
	}
	var req updateRequest
	if err := web.Decode(r, &req); err != nil {
		return err
	}
	s, err := h.app.Commands.UpdateSchedule.Handle(r.Context(), command.UpdateSchedule{
		OrganizationID: org, ID: id, WorkflowID: req.WorkflowID, Cron: req.Cron, Timezone: req.Timezone,
		Input: req.Input, Enabled: req.Enabled,
	})
	if err != nil {
		return err
	}
	web.WriteJSON(w, http.StatusOK, toScheduleJSON(s))
	return nil
}

func (h handlers) deleteSchedule(w http.ResponseWriter, r *http.Request) error {
	org, err := organization(r)
	if err != nil {
		return err
	}
	id, err := scheduleID(r)
	if err != nil {
		return err
	}
	if err := h.app.Commands.DeleteSchedule.Handle(r.Context(), command.DeleteSchedule{OrganizationID: org, ID: id}); err != nil {
		return err
	}
	w.WriteHeader(http.StatusNoContent)
	return nil
}

// tickTimeout bounds a tick started by a request. The tick does not stop when the client
// goes away: what it claimed is dispatched (or left pending for a later tick) either way.
const tickTimeout = 2 * time.Minute

// tick is POST /api/admin/tick: any authenticated principal may fire what is due. The body is
// empty or {}. The answer lists the caller organization's fires only; a call signed by a
// service (no organization) sees all.
func (h handlers) tick(w http.ResponseWriter, r *http.Request) error {
	id, ok := internalauth.FromContext(r.Context())
	if !ok || (id.OrganizationID == "" && id.AuthMode != internalauth.ModeService) {
		return errs.Newf(errs.Unauthorized, "no organization in the request's identity")
	}
	raw, err := io.ReadAll(r.Body)
	var maxErr *http.MaxBytesError
	if errors.As(err, &maxErr) {
		return errs.Newf(errs.PayloadTooLarge, "request body is larger than %d bytes", maxErr.Limit)
	}
	if err != nil {
		return web.InvalidBody(wire.Issue{Path: "", Message: "body could not be read"})
	}
	if body := strings.TrimSpace(string(raw)); body != "" {
		var none struct{}
		if err := web.DecodeBytes(raw, &none); err != nil {
			return err
		}
	}
	ctx, cancel := context.WithTimeout(context.WithoutCancel(r.Context()), tickTimeout)
	defer cancel()
	res, err := h.app.Commands.Tick.Handle(ctx)
	if err != nil {
		return err
	}
	web.WriteJSON(w, http.StatusOK, toTickResponse(res, id.OrganizationID))
	return nil
}
