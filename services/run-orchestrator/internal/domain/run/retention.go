package run

import (
	"errors"
	"fmt"
	"strconv"
	"strings"
	"time"
)

// Retention bounds. The server's period (SVC_RUN_RETENTION) is the longest a finished run is
// kept; an organization may choose a shorter one, down to MinRetention.
const (
	DefaultRetention = 720 * time.Hour
	MinRetention     = time.Minute
	// MaxRetention keeps a period's arithmetic far from overflowing: ten years.
	MaxRetention = 10 * 365 * 24 * time.Hour
)

// ErrForbidden says the caller's role may not do this (403 forbidden): a member changing a
// setting only an owner or admin may change.
var ErrForbidden = errors.New("only an owner or admin of the organization may change this")

// Retention is how long an organization's finished runs are kept: the server's period, or the
// organization's own when it set a shorter one.
type Retention struct {
	OrganizationID string
	// Override is the organization's own period; 0 when it uses the server's.
	Override time.Duration
	// Server is the server's period (SVC_RUN_RETENTION).
	Server time.Duration
	// UpdatedAt is when the organization last set Override; zero when it never did.
	UpdatedAt time.Time
}

// Effective is the period applied: the override when it is shorter than the server's, else
// the server's (an override the server's period was later lowered below does not count).
func (r Retention) Effective() time.Duration {
	if r.Override > 0 && r.Override < r.Server {
		return r.Override
	}
	return r.Server
}

// InvalidRetentionError is a period that cannot be set (400 invalid_body at /runRetention).
type InvalidRetentionError struct{ Message string }

func (e *InvalidRetentionError) Error() string { return e.Message }

// ParseRetention reads an organization's period: a Go duration ("168h", "90m", "1h30m") or a
// whole number of days ("30d"), from MinRetention up to server.
func ParseRetention(s string, server time.Duration) (time.Duration, error) {
	d, err := parsePeriod(strings.TrimSpace(s))
	if err != nil {
		return 0, &InvalidRetentionError{Message: fmt.Sprintf("runRetention %q is not a duration such as \"168h\", \"90m\" or \"30d\"", s)}
	}
	if d < MinRetention {
		return 0, &InvalidRetentionError{Message: fmt.Sprintf("runRetention must be at least %s", FormatRetention(MinRetention))}
	}
	if d > server {
		return 0, &InvalidRetentionError{Message: fmt.Sprintf(
			"runRetention must be at most the server's period, %s: an organization may keep runs for less time, not more", FormatRetention(server))}
	}
	return d, nil
}

func parsePeriod(s string) (time.Duration, error) {
	if days, ok := strings.CutSuffix(s, "d"); ok {
		n, err := strconv.ParseInt(days, 10, 64)
		if err != nil || n < 0 || n > int64(MaxRetention/(24*time.Hour)) {
			return 0, errors.New("bad days")
		}
		return time.Duration(n) * 24 * time.Hour, nil
	}
	d, err := time.ParseDuration(s)
	if err != nil || d < 0 {
		return 0, errors.New("bad duration")
	}
	return d, nil
}

// FormatRetention writes a period the way ParseRetention reads it back, without zero units:
// "720h", "1h30m", "90s".
func FormatRetention(d time.Duration) string {
	d = d.Truncate(time.Second)
	if d <= 0 {
		return "0s"
	}
	var b strings.Builder
	if h := d / time.Hour; h > 0 {
		fmt.Fprintf(&b, "%dh", h)
		d -= h * time.Hour
	}
	if m := d / time.Minute; m > 0 {
		fmt.Fprintf(&b, "%dm", m)
		d -= m * time.Minute
	}
	if s := d / time.Second; s > 0 {
		fmt.Fprintf(&b, "%ds", s)
	}
	return b.String()
}
