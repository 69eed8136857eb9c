package wire

import (
	"fmt"
	"time"
)

// TimeLayout is RFC 3339 in UTC with exactly three fractional digits. Clients built on
// better-auth mis-read timestamps with more digits, so no other form is ever sent.
const TimeLayout = "2006-01-02T15:04:05.000Z"

// FormatTime renders t in TimeLayout.
func FormatTime(t time.Time) string { return t.UTC().Format(TimeLayout) }

// Time is a timestamp that marshals in TimeLayout, and null when zero.
type Time struct{ time.Time }

// NewTime wraps t.
func NewTime(t time.Time) Time { return Time{Time: t} }

// MarshalJSON writes "2026-11-22T02:06:44.537Z" or null.
func (t Time) MarshalJSON() ([]byte, error) {
	if t.IsZero() {
		return []byte("null"), nil
	}
	return []byte(`"` + FormatTime(t.Time) + `"`), nil
}

// UnmarshalJSON accepts any RFC 3339 timestamp, or null.
func (t *Time) UnmarshalJSON(b []byte) error {
	if string(b) == "null" {
		t.Time = time.Time{}
		return nil
	}
	if len(b) < 2 || b[0] != '"' || b[len(b)-1] != '"' {
		return fmt.Errorf("timestamp must be an RFC 3339 string")
	}
	v, err := time.Parse(time.RFC3339Nano, string(b[1:len(b)-1]))
	if err != nil {
		return fmt.Errorf("timestamp must be RFC 3339, like 2026-11-22T02:06:44.537Z")
	}
	t.Time = v
	return nil
}
