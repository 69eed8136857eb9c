package httpapi

import (
	"bytes"
	"encoding/json"
	"errors"
	"io"
	"mime"
	"net/http"
	"strings"

	"svc.dev/libs/web"
	"svc.dev/libs/wire"
	"svc.dev/proto/errs"
	"svc.dev/services/webhook-ingress/internal/app"
	"svc.dev/services/webhook-ingress/internal/app/command"
	"svc.dev/services/webhook-ingress/internal/domain/route"
)

type handlers struct {
	registry   *route.Registry
	app        app.Application
	deliveries deliveryCounter
}

// deliveryResponse is the 202 body.
type deliveryResponse struct {
	WorkflowRunID string `json:"workflowRunId"`
}

// deliverWebhook serves one delivery and counts how it ended (svc_webhook_deliveries_total).
func (h handlers) deliverWebhook(w http.ResponseWriter, r *http.Request) error {
	deduplicated, err := h.deliver(w, r)
	h.deliveries.count(r.Context(), deduplicated, err)
	return err
}

func (h handlers) deliver(w http.ResponseWriter, r *http.Request) (deduplicated bool, err error) {
	rel := strings.TrimPrefix(r.URL.EscapedPath(), Prefix)
	entry, params, outcome := h.registry.Match(r.Method, rel)
	switch outcome {
	case route.NoRoute:
		return false, errs.New(errs.NotFound, nil).WithMessage("no webhook route has this path")
	case route.WrongMethod:
		return false, errs.New(errs.MethodNotAllowed, nil).WithMessage("the webhook route at this path takes another method")
	}
	req, err := toRouteRequest(r, params)
	if err != nil {
		return false, err
	}
	accepted, err := h.app.Commands.DeliverWebhook.Handle(r.Context(), command.DeliverWebhook{Entry: entry, Request: req, Path: r.URL.Path})
	if err != nil {
		return false, err
	}
	web.WriteJSON(w, http.StatusAccepted, deliveryResponse{WorkflowRunID: accepted.RunID})
	return accepted.Deduplicated, nil
}

// toRouteRequest reads the body once: raw for the signature, parsed only when the content type
// is application/json (otherwise the body is an empty object: docs/API.md, "Webhooks").
func toRouteRequest(r *http.Request, params map[string]string) (route.Request, error) {
	raw, err := io.ReadAll(r.Body)
	var maxErr *http.MaxBytesError
	if errors.As(err, &maxErr) {
		return route.Request{}, errs.Newf(errs.PayloadTooLarge, "request body is larger than %d bytes", maxErr.Limit)
	}
	if err != nil {
		return route.Request{}, web.InvalidBody(wire.Issue{Path: "", Message: "body could not be read"})
	}
	req := route.Request{Body: map[string]any{}, Headers: r.Header.Clone(), RawBody: raw, Params: params,
		ContentType: mediaType(r.Header.Get("Content-Type"))}
	if req.ContentType == "application/json" {
		if err := web.CheckJSON(raw); err != nil {
			return route.Request{}, err
		}
		body, err := parseJSON(raw)
		if err != nil {
			return route.Request{}, web.InvalidBody(wire.Issue{Path: "", Message: "body is not valid JSON"})
		}
		req.Body = body
	}
	return req, nil
}

// mediaType is the content type without parameters, lower case; "" when absent or unreadable.
func mediaType(v string) string {
	if v == "" {
		return ""
	}
	mt, _, err := mime.ParseMediaType(v)
	if err != nil {
		return ""
	}
	return mt
}

// parseJSON reads exactly one JSON value, keeping numbers exact.
func parseJSON(raw []byte) (any, error) {
	dec := json.NewDecoder(bytes.NewReader(raw))
	dec.UseNumber()
	var v any
	if err := dec.Decode(&v); err != nil {
		return nil, err
	}
	if _, err := dec.Token(); !errors.Is(err, io.EOF) {
		return nil, errors.New("more than one JSON value")
	}
	return v, nil
}
