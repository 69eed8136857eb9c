package httpapi

import (
	"encoding/json"
	"net/http"
	"time"

	"github.com/gorilla/mux"

	"svc.dev/libs/internalauth"
	"svc.dev/libs/web"
	"svc.dev/libs/wire"
	"svc.dev/services/run-orchestrator/internal/app/command"
	"svc.dev/services/run-orchestrator/internal/domain/run"
)

// retentionResponse is an organization's retention: its own period (null when it uses the
// server's), the server's, the one applied and when the organization last set its own.
type retentionResponse struct {
	OrganizationID   string    `json:"organizationId"`
	RunRetention     *string   `json:"runRetention"`
	ServerRetention  string    `json:"serverRetention"`
	Effective        string    `json:"effectiveRetention"`
	EffectiveSeconds int64     `json:"effectiveRetentionSeconds"`
	UpdatedAt        wire.Time `json:"updatedAt"`
}

func toRetentionResponse(r run.Retention) retentionResponse {
	out := retentionResponse{OrganizationID: r.OrganizationID, ServerRetention: run.FormatRetention(r.Server),
		Effective: run.FormatRetention(r.Effective()), EffectiveSeconds: int64(r.Effective() / time.Second), UpdatedAt: wire.NewTime(r.UpdatedAt)}
	if r.Override > 0 {
		s := run.FormatRetention(r.Override)
		out.RunRetention = &s
	}
	return out
}

// retentionOrg is the organization the path names, which must be the caller's own ("current"
// names it too): any other is not found, whether or not it exists.
func retentionOrg(r *http.Request) (string, error) {
	id, want := org(r), mux.Vars(r)["orgId"]
	if want != "current" && want != id {
		return "", run.ErrNotFound
	}
	return id, nil
}

func (s server) getRetention(w http.ResponseWriter, r *http.Request) error {
	id, err := retentionOrg(r)
	if err != nil {
		return err
	}
	ret, err := s.h.App.Queries.Retention.Get(r.Context(), id)
	if err != nil {
		return err
	}
	web.WriteJSON(w, http.StatusOK, toRetentionResponse(ret))
	return nil
}

// setRetentionRequest is PUT's body: runRetention is a period ("168h", "30d") or null for the
// server's. It must be present: an empty body changes nothing by mistake.
type setRetentionRequest struct {
	RunRetention json.RawMessage `json:"runRetention"`
}

func (s server) setRetention(w http.ResponseWriter, r *http.Request) error {
	var req setRetentionRequest
	if err := web.Decode(r, &req); err != nil {
		return err
	}
	var period *string
	switch { // the body is checked before the organization, as on the other routes with an id
	case len(req.RunRetention) == 0:
		return web.InvalidBody(wire.Issue{Path: "/runRetention", Message: `runRetention is required: a period such as "168h" or "30d", or null for the server's`})
	case string(req.RunRetention) != "null":
		var p string
		if json.Unmarshal(req.RunRetention, &p) != nil {
			return web.InvalidBody(wire.Issue{Path: "/runRetention", Message: `runRetention must be a string such as "168h" or "30d", or null`})
		}
		period = &p
	}
	id, err := retentionOrg(r)
	if err != nil {
		return err
	}
	ret, err := s.h.App.Commands.SetRetention.Handle(r.Context(), command.SetRetention{OrganizationID: id, MayChange: mayChangeSettings(r), Period: period})
	if err != nil {
		return err
	}
	web.WriteJSON(w, http.StatusOK, toRetentionResponse(ret))
	return nil
}

// mayChangeSettings: an owner's or admin's session, or one of the organization's API keys
// (only an owner or admin can create one).
func mayChangeSettings(r *http.Request) bool {
	id, _ := internalauth.FromContext(r.Context())
	switch id.AuthMode {
	case internalauth.ModeAPIKey:
		return true
	case internalauth.ModeSession:
		return id.Role == "owner" || id.Role == "admin"
	default:
		return false
	}
}
