// Package mail holds identity's mail adapters, chosen with SVC_MAIL. DiscardMailer (none, the
// default) sends nothing. LogMailer (log) is the development one: it writes each mail's link
// to the log at info level instead of sending it, reset tokens included, so it is for
// development and tests only. An SMTP adapter would implement the same port.
package mail

import (
	"context"
	"log/slog"
)

// LogMailer implements port.Mailer by logging.
type LogMailer struct{ log *slog.Logger }

// NewLogMailer returns the mailer.
func NewLogMailer(log *slog.Logger) *LogMailer {
	if log == nil {
		panic("nil logger")
	}
	return &LogMailer{log: log}
}

// SendPasswordReset logs the reset link for email.
func (m *LogMailer) SendPasswordReset(ctx context.Context, email, link string) error {
	m.log.InfoContext(ctx, "mail: password reset (dev mailer: not sent)", "to", email, "link", link)
	return nil
}

// SendInvitation logs the invitation link for email.
func (m *LogMailer) SendInvitation(ctx context.Context, email, organizationName, link string) error {
	m.log.InfoContext(ctx, "mail: invitation (dev mailer: not sent)", "to", email, "organization", organizationName, "link", link)
	return nil
}
