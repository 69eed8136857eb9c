// Package app is webhook-ingress's application layer: its use case, wired over the ports it
// needs (app/port).
package app

import (
	"log/slog"

	"svc.dev/services/webhook-ingress/internal/app/command"
	"svc.dev/services/webhook-ingress/internal/app/port"
)

// Application is every use case of webhook-ingress.
type Application struct {
	Commands Commands
	Queries  Queries
}

// Commands are the use cases that change state: a delivery starts a run.
type Commands struct {
	DeliverWebhook command.DeliverWebhookHandler
}

// Queries is empty: webhook-ingress serves no reads. Its routes are Go values registered at
// start-up (domain/route's Registry), not state a use case reads.
type Queries struct{}

// New wires the use cases; every dependency is required.
func New(runs port.Dispatcher, keys port.KeyStore, orgs port.Organizations, log *slog.Logger) Application {
	return Application{
		Commands: Commands{
			DeliverWebhook: command.NewDeliverWebhookHandler(runs, keys, orgs, log),
		},
	}
}
