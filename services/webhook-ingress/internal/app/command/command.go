// Package command holds webhook-ingress's one use case, DeliverWebhook: a delivery verified by
// its route, checked against the route's schema and turned into at most one run per key.
package command
