package mail

import (
	"context"
	"log/slog"
)

// DiscardMailer implements port.Mailer for a deployment that sends no mail (SVC_MAIL=none,
// the default): nothing is sent and no link is logged — a reset link in a log is a way into
// the account for anyone who reads the log. Each dropped mail is logged without its link or
// address, so that an operator can see that mail was asked for.
type DiscardMailer struct{ log *slog.Logger }

// NewDiscardMailer returns the mailer.
func NewDiscardMailer(log *slog.Logger) *DiscardMailer {
	if log == nil {
		panic("nil logger")
	}
	return &DiscardMailer{log: log}
}

// SendPasswordReset drops the mail.
func (m *DiscardMailer) SendPasswordReset(ctx context.Context, _, _ string) error {
	m.log.InfoContext(ctx, "mail: password reset not sent (SVC_MAIL=none)")
	return nil
}

// SendInvitation drops the mail.
func (m *DiscardMailer) SendInvitation(ctx context.Context, _, _, _ string) error {
	m.log.InfoContext(ctx, "mail: invitation not sent (SVC_MAIL=none)")
	return nil
}
