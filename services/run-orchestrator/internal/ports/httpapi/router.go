// Package http is the inbound HTTP port of run-orchestrator: its public routes under /api, their
// DTOs and converters, and the table that maps domain errors to public codes.
package httpapi

import (
	"log/slog"
	"net/http"
	"strconv"
	"strings"

	"github.com/gorilla/mux"

	"svc.dev/libs/internalauth"
	"svc.dev/libs/web"
	"svc.dev/libs/wire"
	"svc.dev/proto/errs"
	"svc.dev/services/run-orchestrator/internal/app"
	"svc.dev/services/run-orchestrator/internal/app/command"
	"svc.dev/services/run-orchestrator/internal/app/port"
	"svc.dev/services/run-orchestrator/internal/app/query"
	"svc.dev/services/run-orchestrator/internal/domain/run"
)

// Handlers are the use cases the routes call and how the routes pace and bound them.
type Handlers struct {
	App app.Application
	// Events serves the event streams, OrgStatuses the organization stream's catch-up reads;
	// Stream paces them.
	Stream StreamConfig
	// PageBytes bounds the bytes of a page of runs or of logs; 0 is port.PageBytes.
	PageBytes int64
}

type server struct {
	h      Handlers
	stream StreamConfig
	log    *slog.Logger
}

// NewRouter returns the router of run-orchestrator's public routes. Paths it does
// not know answer a JSON 404, known paths with another method a JSON 405.
func NewRouter(h Handlers, log *slog.Logger) *mux.Router {
	if log == nil {
		log = slog.New(slog.DiscardHandler)
	}
	if h.PageBytes <= 0 {
		h.PageBytes = port.PageBytes
	}
	s := server{h: h, stream: h.Stream, log: log}
	rs := web.Responder{Log: log, Map: func(err error) *errs.Error { return toAppError(err) }}
	r := web.NewRouter()
	r.Handle("/api/workflows/{id}/run", rs.Wrap(s.startRun)).Methods(http.MethodPost)
	r.Handle("/api/workflows/{id}/runs", rs.Wrap(s.listWorkflowRuns)).Methods(http.MethodGet)
	r.Handle("/api/runs", rs.Wrap(s.listRuns)).Methods(http.MethodGet)
	r.Handle("/api/runs/events", rs.Wrap(s.orgEvents)).Methods(http.MethodGet)
	r.Handle("/api/runs/{runId}", rs.Wrap(s.getRun)).Methods(http.MethodGet)
	r.Handle("/api/runs/{runId}/events", rs.Wrap(s.runEvents)).Methods(http.MethodGet)
	r.Handle("/api/runs/{runId}/logs", rs.Wrap(s.logs)).Methods(http.MethodGet)
	r.Handle("/api/runs/{runId}/cancel", rs.Wrap(s.cancel)).Methods(http.MethodPost)
	r.Handle("/api/runs/{runId}/signals", rs.Wrap(s.signal)).Methods(http.MethodPost)
	r.Handle("/api/organizations/{orgId}/retention", rs.Wrap(s.getRetention)).Methods(http.MethodGet)
	r.Handle("/api/organizations/{orgId}/retention", rs.Wrap(s.setRetention)).Methods(http.MethodPut)
	return r
}

func org(r *http.Request) string {
	id, _ := internalauth.FromContext(r.Context())
	return id.OrganizationID
}

func (s server) startRun(w http.ResponseWriter, r *http.Request) error {
	var req startRunRequest
	if r.ContentLength != 0 {
		if err := web.Decode(r, &req); err != nil {
			return err
		}
	}
	key, err := idempotencyKey(r, req.IdempotencyKey)
	if err != nil {
		return err
	}
	started, err := s.h.App.Commands.StartRun.Handle(r.Context(), command.StartRun{
		OrganizationID: org(r), Workflow: port.WorkflowRef{ID: mux.Vars(r)["id"]},
		Input: req.Input, IdempotencyKey: key,
	})
	if err != nil {
		return err
	}
	web.WriteJSON(w, http.StatusAccepted, startRunResponse{RunID: started.RunID, Spec: run.Spec})
	return nil
}

// idempotencyKey is the start's key: the body's idempotencyKey, else the Idempotency-Key
// header. Each is held to its own rule (at most 255 characters) whether or not it is the one
// used.
func idempotencyKey(r *http.Request, body *string) (string, error) {
	header := r.Header.Get("Idempotency-Key")
	if len(header) > 255 {
		return "", web.InvalidBody(wire.Issue{Path: "/idempotencyKey", Message: "the Idempotency-Key header must be at most 255 characters"})
	}
	if body == nil {
		return header, nil
	}
	if len(*body) > 255 {
		return "", web.InvalidBody(wire.Issue{Path: "/idempotencyKey", Message: "idempotencyKey must be at most 255 characters"})
	}
	return *body, nil
}

func (s server) getRun(w http.ResponseWriter, r *http.Request) error {
	id := mux.Vars(r)["runId"]
	if !wire.ValidID(wire.Run, id) {
		return run.ErrNotFound
	}
	rec, err := s.h.App.Queries.Runs.Get(r.Context(), org(r), id)
	if err != nil {
		return err
	}
	web.WriteJSON(w, http.StatusOK, toRunResponse(rec, strings.Contains(r.URL.Query().Get("include"), "workflow")))
	return nil
}

func (s server) listRuns(w http.ResponseWriter, r *http.Request) error {
	return s.list(w, r, r.URL.Query().Get("workflowId"))
}

func (s server) listWorkflowRuns(w http.ResponseWriter, r *http.Request) error {
	return s.list(w, r, mux.Vars(r)["id"])
}

var runsRule = wire.ListRule("runs") //nolint:gochecknoglobals // a constant rule

func (s server) list(w http.ResponseWriter, r *http.Request, workflowID string) error {
	q := r.URL.Query()
	status := q.Get("status")
	// A cursor resumes this organization's list under these filters only: with another filter
	// its position would skip that list's newer runs.
	rule := runsRule.Scoped(org(r), workflowID, status)
	page, err := rule.ParsePage(q)
	if err != nil {
		return err
	}
	f := run.ListFilter{WorkflowID: workflowID, Status: run.Status(status), Limit: page.Limit}
	if f.Status != "" && !f.Status.Valid() {
		return errs.Newf(errs.InvalidQuery, "status must be one of queued, running, waiting, completed, failed, cancelled")
	}
	if len(page.After) > 0 {
		f.After = page.After[0]
	}
	// The page stops at the limit or at PageBytes, whichever comes first: a short page with a
	// cursor is not the last one.
	res, err := s.h.App.Queries.ListRuns.Handle(r.Context(), query.ListRuns{OrganizationID: org(r), Filter: f, MaxBytes: s.h.PageBytes})
	if err != nil {
		return err
	}
	var next *string
	if res.More && len(res.Runs) > 0 {
		c := rule.EncodeCursor(res.Runs[len(res.Runs)-1].ID)
		next = &c
	}
	items := make([]runResponse, len(res.Runs))
	for i, rec := range res.Runs {
		items[i] = toRunResponse(rec, false)
	}
	web.WriteJSON(w, http.StatusOK, map[string]any{"items": items, "nextCursor": next})
	return nil
}

var logsRule = wire.LogsRule("logs") //nolint:gochecknoglobals // a constant rule

func (s server) logs(w http.ResponseWriter, r *http.Request) error {
	id := mux.Vars(r)["runId"]
	if !wire.ValidID(wire.Run, id) {
		return run.ErrNotFound
	}
	// The cursor is a change sequence of this run: on another run's logs it would skip entries.
	rule := logsRule.Scoped(id)
	page, err := rule.ParsePage(r.URL.Query())
	if err != nil {
		return err
	}
	var after int64
	if len(page.After) > 0 {
		after, err = strconv.ParseInt(page.After[0], 10, 64)
		if err != nil || after < 0 {
			return &wire.PageError{Message: "after must be a nextCursor returned by this list"}
		}
	}
	// A page stops at the limit or at PageBytes: a page shorter than the limit may not be the
	// end, so a reader goes on until a page is empty (the cursor is returned on every page).
	items, err := s.h.App.Queries.Runs.Logs(r.Context(), org(r), id, after, page.Limit, s.h.PageBytes)
	if err != nil {
		if code := toAppError(err).Code; code == errs.NotFound || code == errs.Unavailable {
			return err // a store that cannot be reached is 503, as on every route here
		}
		return errs.New(errs.LogsFailed, err).WithMessage("the logs could not be read; try again")
	}
	out := make([]attemptResponse, len(items))
	for i, a := range items {
		out[i] = toAttemptResponse(a)
		after = a.Seq
	}
	// The cursor is the last change sequence seen, so a follower resumes from the end too.
	web.WriteJSON(w, http.StatusOK, map[string]any{"items": out, "nextCursor": rule.EncodeCursor(strconv.FormatInt(after, 10))})
	return nil
}

func (s server) cancel(w http.ResponseWriter, r *http.Request) error {
	id := mux.Vars(r)["runId"]
	if !wire.ValidID(wire.Run, id) {
		return run.ErrNotFound
	}
	st, err := s.h.App.Commands.CancelRun.Handle(r.Context(), command.CancelRun{OrganizationID: org(r), RunID: id})
	if err != nil {
		return err
	}
	web.WriteJSON(w, http.StatusAccepted, map[string]any{"runId": id, "status": st})
	return nil
}

func (s server) signal(w http.ResponseWriter, r *http.Request) error {
	id := mux.Vars(r)["runId"]
	if !wire.ValidID(wire.Run, id) {
		return run.ErrNotFound
	}
	var req signalRequest
	if err := web.Decode(r, &req); err != nil {
		return err
	}
	if req.Name == "" || len(req.Name) > 200 {
		return web.InvalidBody(wire.Issue{Path: "/name", Message: "name must be a string of 1 to 200 characters"})
	}
	res, err := s.h.App.Commands.SignalRun.Handle(r.Context(), command.SignalRun{OrganizationID: org(r), RunID: id, Name: req.Name, Payload: req.Payload})
	if err != nil {
		return err
	}
	web.WriteJSON(w, http.StatusAccepted, toSignalResponse(req.Name, res))
	return nil
}
