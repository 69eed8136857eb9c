package apiclient

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"net/url"
	"strconv"
)

// The domain routes answer JSON that the CLI prints as it came (JSON output)
// or reads a few fields of (tables), so these methods return the raw answer.

// pageLimit is the page size used to read whole lists (the API allows at most 500).
const pageLimit = 500

// Page is one page of a list: its items and the cursor of the next page (nil after the last;
// the logs endpoint returns one even on the last page).
type Page struct {
	Items      []json.RawMessage `json:"items"`
	NextCursor *string           `json:"nextCursor"`
}

// domainAuth is the credential of a domain call: the key, else the client's own (WithAuth).
func (c *Client) domainAuth(key string) Auth {
	if key == "" {
		return c.auth
	}
	return Auth{APIKey: key}
}

func (c *Client) get(ctx context.Context, key, path string, q url.Values) (json.RawMessage, error) {
	resp, err := c.do(ctx, request{method: http.MethodGet, path: path, query: q, auth: c.domainAuth(key)})
	if err != nil {
		return nil, err
	}
	return resp.body, nil
}

func (c *Client) send(ctx context.Context, key, method, path string, body any, h http.Header) (json.RawMessage, error) {
	resp, err := c.do(ctx, request{method: method, path: path, auth: c.domainAuth(key), body: body, header: h})
	if err != nil {
		return nil, err
	}
	return resp.body, nil
}

// eachPage reads a list page by page, from the start to the last page (nextCursor null), and
// calls fn with each page's items: only one page is held at a time, however long the list.
func (c *Client) eachPage(ctx context.Context, key, path string, q url.Values, fn func(items []json.RawMessage) error) error {
	if q == nil {
		q = url.Values{}
	}
	q.Set("limit", strconv.Itoa(pageLimit))
	for {
		raw, err := c.get(ctx, key, path, q)
		if err != nil {
			return err
		}
		var p Page
		if err := json.Unmarshal(raw, &p); err != nil {
			return err
		}
		if err := fn(p.Items); err != nil {
			return err
		}
		// A page may be short and not the last (the API stops a page at a byte budget): only a
		// null cursor ends the list.
		if p.NextCursor == nil || *p.NextCursor == "" || len(p.Items) == 0 {
			return nil
		}
		q.Set("after", *p.NextCursor)
	}
}

func join(parts ...string) string {
	out := ""
	for i, p := range parts {
		if i%2 == 1 {
			p = url.PathEscape(p)
		}
		out += p
	}
	return out
}

// EachWorkflow calls fn with every workflow of the organization, newest first, a page at a time.
func (c *Client) EachWorkflow(ctx context.Context, key string, fn func(items []json.RawMessage) error) error {
	return c.eachPage(ctx, key, "/api/workflows", nil, fn)
}

// ListWorkflowsPage reads one page of workflows after cursor ("" from the start); limit 0 is
// the API's default.
func (c *Client) ListWorkflowsPage(ctx context.Context, key, after string, limit int) (*Page, error) {
	return c.page(ctx, key, "/api/workflows", map[string]string{"after": after}, limit)
}

// GetWorkflow reads a workflow.
func (c *Client) GetWorkflow(ctx context.Context, key, id string) (json.RawMessage, error) {
	return c.get(ctx, key, join("/api/workflows/", id), nil)
}

// DeleteWorkflow deletes a workflow (runs in flight are unaffected).
func (c *Client) DeleteWorkflow(ctx context.Context, key, id string) error {
	_, err := c.send(ctx, key, http.MethodDelete, join("/api/workflows/", id), nil, nil)
	return err
}

// ListConnectors returns the connector catalog, each entry as the API sends it (type,
// category, title, description, params and output schemas, retry policy, timeout).
func (c *Client) ListConnectors(ctx context.Context, key string) ([]json.RawMessage, error) {
	raw, err := c.get(ctx, key, "/api/connectors", nil)
	if err != nil {
		return nil, err
	}
	var body struct {
		Connectors []json.RawMessage `json:"connectors"`
	}
	if err := json.Unmarshal(raw, &body); err != nil {
		return nil, fmt.Errorf("connectors: %w", err)
	}
	return body.Connectors, nil
}

// CreateWorkflowRequest is POST /api/workflows's body.
type CreateWorkflowRequest struct {
	Name        string          `json:"name"`
	Description string          `json:"description,omitempty"`
	Definition  json.RawMessage `json:"definition,omitempty"`
}

// CreateWorkflow creates a workflow.
func (c *Client) CreateWorkflow(ctx context.Context, key string, req CreateWorkflowRequest) (json.RawMessage, error) {
	return c.send(ctx, key, http.MethodPost, "/api/workflows", req, nil)
}

// ApplyOps sends a batch of edit operations; ifMatch > 0 is sent as If-Match.
func (c *Client) ApplyOps(ctx context.Context, key, workflowID string, ops json.RawMessage, ifMatch int64) (json.RawMessage, error) {
	h := http.Header{}
	if ifMatch > 0 {
		h.Set("If-Match", strconv.FormatInt(ifMatch, 10))
	}
	return c.send(ctx, key, http.MethodPost, join("/api/workflows/", workflowID, "/operations"), map[string]json.RawMessage{"ops": ops}, h)
}

// StartRunRequest is POST /api/workflows/:id/run's body.
type StartRunRequest struct {
	Input          json.RawMessage `json:"input,omitempty"`
	IdempotencyKey string          `json:"idempotencyKey,omitempty"`
}

// StartRun dispatches a run of the workflow.
func (c *Client) StartRun(ctx context.Context, key, workflowID string, req StartRunRequest) (json.RawMessage, error) {
	return c.send(ctx, key, http.MethodPost, join("/api/workflows/", workflowID, "/run"), req, nil)
}

// GetRun reads a run; withWorkflow adds the pinned definition.
func (c *Client) GetRun(ctx context.Context, key, runID string, withWorkflow bool) (json.RawMessage, error) {
	var q url.Values
	if withWorkflow {
		q = url.Values{"include": {"workflow"}}
	}
	return c.get(ctx, key, join("/api/runs/", runID), q)
}

// EachRun calls fn with every run, newest first, a page at a time, optionally of one workflow
// or in one status.
func (c *Client) EachRun(ctx context.Context, key, workflowID, status string, fn func(items []json.RawMessage) error) error {
	q := url.Values{}
	if workflowID != "" {
		q.Set("workflowId", workflowID)
	}
	if status != "" {
		q.Set("status", status)
	}
	return c.eachPage(ctx, key, "/api/runs", q, fn)
}

// ListRunsPage reads one page of runs after cursor ("" from the start), optionally of one
// workflow or in one status; limit 0 is the API's default.
func (c *Client) ListRunsPage(ctx context.Context, key, workflowID, status, after string, limit int) (*Page, error) {
	return c.page(ctx, key, "/api/runs", map[string]string{"workflowId": workflowID, "status": status, "after": after}, limit)
}

// Logs reads one page of a run's step attempts after cursor ("" from the start). A page may
// hold fewer than limit attempts and not be the last (the API stops a page at a byte budget):
// a reader of the whole log goes on until a page is empty.
func (c *Client) Logs(ctx context.Context, key, runID, after string, limit int) (*Page, error) {
	return c.page(ctx, key, join("/api/runs/", runID, "/logs"), map[string]string{"after": after}, limit)
}

// page reads one page of a list: the query members that are set, and limit when positive
// (0 is the API's default).
func (c *Client) page(ctx context.Context, key, path string, query map[string]string, limit int) (*Page, error) {
	q := url.Values{}
	for k, v := range query {
		if v != "" {
			q.Set(k, v)
		}
	}
	if limit > 0 {
		q.Set("limit", strconv.Itoa(limit))
	}
	raw, err := c.get(ctx, key, path, q)
	if err != nil {
		return nil, err
	}
	var p Page
	if err := json.Unmarshal(raw, &p); err != nil {
		return nil, err
	}
	return &p, nil
}

// CancelRun cancels a run.
func (c *Client) CancelRun(ctx context.Context, key, runID string) (json.RawMessage, error) {
	return c.send(ctx, key, http.MethodPost, join("/api/runs/", runID, "/cancel"), struct{}{}, nil)
}

// SignalRequest is POST /api/runs/:id/signals's body.
type SignalRequest struct {
	Name    string          `json:"name"`
	Payload json.RawMessage `json:"payload,omitempty"`
}

// SignalRun stores a signal for a run.
func (c *Client) SignalRun(ctx context.Context, key, runID string, req SignalRequest) (json.RawMessage, error) {
	return c.send(ctx, key, http.MethodPost, join("/api/runs/", runID, "/signals"), req, nil)
}

// EachSchedule calls fn with every schedule of the organization, a page at a time, optionally
// of one workflow.
func (c *Client) EachSchedule(ctx context.Context, key, workflowID string, fn func(items []json.RawMessage) error) error {
	q := url.Values{}
	if workflowID != "" {
		q.Set("workflowId", workflowID)
	}
	return c.eachPage(ctx, key, "/api/schedules", q, fn)
}

// ListSchedulesPage reads one page of schedules after cursor ("" from the start), optionally
// of one workflow; limit 0 is the API's default.
func (c *Client) ListSchedulesPage(ctx context.Context, key, workflowID, after string, limit int) (*Page, error) {
	return c.page(ctx, key, "/api/schedules", map[string]string{"workflowId": workflowID, "after": after}, limit)
}

// CreateScheduleRequest is POST /api/schedules's body.
type CreateScheduleRequest struct {
	WorkflowID string          `json:"workflowId"`
	Cron       string          `json:"cron"`
	Timezone   string          `json:"timezone,omitempty"`
	Input      json.RawMessage `json:"input,omitempty"`
	Enabled    *bool           `json:"enabled,omitempty"`
}

// CreateSchedule creates a schedule.
func (c *Client) CreateSchedule(ctx context.Context, key string, req CreateScheduleRequest) (json.RawMessage, error) {
	return c.send(ctx, key, http.MethodPost, "/api/schedules", req, nil)
}

// GetSchedule reads one schedule.
func (c *Client) GetSchedule(ctx context.Context, key, id string) (json.RawMessage, error) {
	return c.get(ctx, key, join("/api/schedules/", id), nil)
}

// UpdateSchedule changes a schedule: body holds the members to change (a PATCH).
func (c *Client) UpdateSchedule(ctx context.Context, key, id string, body json.RawMessage) (json.RawMessage, error) {
	return c.send(ctx, key, http.MethodPatch, join("/api/schedules/", id), body, nil)
}

// DeleteSchedule deletes a schedule.
func (c *Client) DeleteSchedule(ctx context.Context, key, id string) error {
	_, err := c.send(ctx, key, http.MethodDelete, join("/api/schedules/", id), nil, nil)
	return err
}

// Tick fires the schedules that are due now (POST /api/admin/tick, any principal may): the
// answer says how many the tick claimed for the caller's organization and which runs it
// started or failed to start.
func (c *Client) Tick(ctx context.Context, key string) (json.RawMessage, error) {
	return c.send(ctx, key, http.MethodPost, "/api/admin/tick", struct{}{}, nil)
}

// Retention reads how long the organization's finished runs are kept (GET
// /api/organizations/current/retention: the organization of the credentials).
func (c *Client) Retention(ctx context.Context, key string) (json.RawMessage, error) {
	return c.get(ctx, key, "/api/organizations/current/retention", nil)
}

// SetRetention sets the organization's own period ("168h", "30d"); nil goes back to the
// server's.
func (c *Client) SetRetention(ctx context.Context, key string, period *string) (json.RawMessage, error) {
	return c.send(ctx, key, http.MethodPut, "/api/organizations/current/retention", map[string]*string{"runRetention": period}, nil)
}
