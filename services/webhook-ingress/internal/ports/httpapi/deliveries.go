package httpapi

import (
	"context"
	"fmt"

	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/metric"

	"svc.dev/proto/errs"
)

// How a delivery ended, as svc_webhook_deliveries_total counts it: result new (a run started),
// duplicate (its key named an earlier run: nothing started) or refused (not accepted), and
// for a refusal a reason from a fixed set (refusalReason).
const (
	resultNew       = "new"
	resultDuplicate = "duplicate"
	resultRefused   = "refused"
)

// refusalReasons maps the public code a refused delivery is answered with (toAppError, the
// one error table) to its reason label. A code the table adds later counts as "other" until
// it is named here, so the label set stays fixed.
var refusalReasons = map[errs.Code]string{ //nolint:gochecknoglobals // fixed label set
	errs.InvalidSignature: "bad_signature",
	errs.NotFound:         "unknown_hook",
	errs.MethodNotAllowed: "wrong_method",
	errs.PayloadTooLarge:  "too_large",
	errs.InvalidBody:      "invalid_body",
	errs.WebhookRejected:  "rejected",
	errs.WorkflowNotFound: "workflow_not_found",
	errs.WorkflowInvalid:  "workflow_invalid",
	errs.Unavailable:      "unavailable",
	errs.InternalOnlyLog:  "internal",
}

// refusalReason is the reason label of a delivery refused with err.
func refusalReason(err error) string {
	if r, ok := refusalReasons[toAppError(err).Code]; ok {
		return r
	}
	return "other"
}

// deliveryCounter is svc_webhook_deliveries_total.
type deliveryCounter struct{ c metric.Int64Counter }

func newDeliveryCounter(mp metric.MeterProvider) deliveryCounter {
	c, err := mp.Meter("svc.dev/services/webhook-ingress").Int64Counter("svc_webhook_deliveries_total",
		metric.WithDescription(`Webhook deliveries received, by result (new: a run started; duplicate: its idempotency key named an earlier run; refused: not accepted) and, for a refusal, its reason (bad_signature, unknown_hook, wrong_method, too_large, invalid_body, rejected, workflow_not_found, workflow_invalid, unavailable, internal); reason is "" for the accepted.`),
		metric.WithUnit("{delivery}"))
	if err != nil {
		panic(fmt.Sprintf("deliveries counter: %v", err)) // only for an invalid name
	}
	ctx := context.Background()
	c.Add(ctx, 0, metric.WithAttributes(attribute.String("result", resultNew), attribute.String("reason", "")))
	c.Add(ctx, 0, metric.WithAttributes(attribute.String("result", resultDuplicate), attribute.String("reason", "")))
	for _, r := range refusalReasons {
		c.Add(ctx, 0, metric.WithAttributes(attribute.String("result", resultRefused), attribute.String("reason", r)))
	}
	return deliveryCounter{c: c}
}

// count records one delivery: accepted (deduplicated or not) when err is nil, else refused.
func (d deliveryCounter) count(ctx context.Context, deduplicated bool, err error) {
	result, reason := resultNew, ""
	switch {
	case err != nil:
		result, reason = resultRefused, refusalReason(err)
	case deduplicated:
		result = resultDuplicate
	}
	d.c.Add(context.WithoutCancel(ctx), 1, metric.WithAttributes(attribute.String("result", result), attribute.String("reason", reason)))
}
