package schedule

import (
	"fmt"
	"slices"
	"strings"
	"sync"
	"time"
	_ "time/tzdata" // IANA zones even on hosts without a zoneinfo database

	"github.com/adhocore/gronx"
)

// InvalidCronError is a cron expression or a timezone that cannot be used; Message says what
// is wrong in words a client can act on.
type InvalidCronError struct{ Message string }

func (e *InvalidCronError) Error() string { return "invalid cron: " + e.Message }

func invalidCron(format string, args ...any) *InvalidCronError {
	return &InvalidCronError{Message: fmt.Sprintf(format, args...)}
}

// descriptors are the @-names a cron may be, and the five fields each stands for. gronx knows
// more (@always, @everysecond, ...), but the contract allows 5 fields or the usual descriptors.
func descriptors() map[string]string {
	return map[string]string{
		"@yearly": "0 0 1 1 *", "@annually": "0 0 1 1 *", "@monthly": "0 0 1 * *",
		"@weekly": "0 0 * * 0", "@daily": "0 0 * * *", "@midnight": "0 0 * * *", "@hourly": "0 * * * *",
	}
}

// fieldNames and fieldRanges describe the five fields, for messages.
var fieldNames = [5]string{"minute", "hour", "day-of-month", "month", "day-of-week"} //nolint:gochecknoglobals // fixed table

var fieldRanges = [5]string{"0-59", "0-23", "1-31", "1-12 or JAN-DEC", "0-6 or SUN-SAT"} //nolint:gochecknoglobals // fixed table

// Cron is a checked cron expression in an IANA timezone. Fire times are wall-clock times of
// that zone: on a day the clocks skip a wall time (spring forward), a fire at a skipped time
// happens once, at the moment the clocks jump; on a day a wall time repeats (fall back), it
// fires once, at its first occurrence.
type Cron struct {
	expr     string // as the client wrote it, trimmed
	fields   string // the five fields gronx evaluates
	timezone string
	loc      *time.Location
}

// MaxCronLength bounds what a client may send as a cron expression.
const MaxCronLength = 200

// ParseCron checks expr (5 fields or a descriptor) and timezone ("" means UTC).
func ParseCron(expr, timezone string) (c Cron, err error) {
	defer func() {
		// gronx is not written for hostile input; a panic in it is a bad expression, not a 500.
		if r := recover(); r != nil {
			c, err = Cron{}, invalidCron("%q could not be read as a cron expression", expr)
		}
	}()
	expr = strings.TrimSpace(expr)
	if timezone == "" {
		timezone = "UTC"
	}
	loc, err := loadLocation(timezone)
	if err != nil {
		return Cron{}, err
	}
	if len(expr) > MaxCronLength {
		return Cron{}, invalidCron("cron is longer than %d characters", MaxCronLength)
	}
	fields, err := checkFields(expr)
	if err != nil {
		return Cron{}, err
	}
	c = Cron{expr: expr, fields: fields, timezone: timezone, loc: loc}
	// A year of wall-clock days is enough to meet every valid expression but 29 February ones;
	// those are checked over the next leap year too.
	if _, err := c.Next(time.Date(2024, 1, 1, 0, 0, 0, 0, time.UTC).Add(-time.Minute)); err != nil {
		return Cron{}, invalidCron("%q never matches a date (for example the 30th of February)", expr)
	}
	return c, nil
}

func loadLocation(timezone string) (*time.Location, error) {
	shown := timezone
	if len(shown) > 64 {
		shown = shown[:64] + "…" // the answer never echoes more than this of a long query
	}
	bad := invalidCron("timezone %q is not an IANA time zone name such as UTC, Europe/Paris or America/New_York", shown)
	if len(timezone) > 64 || timezone == "Local" || strings.ContainsAny(timezone, "\\\x00") || strings.HasPrefix(timezone, "/") {
		return nil, bad
	}
	loc, err := time.LoadLocation(timezone)
	if err != nil {
		return nil, bad
	}
	return loc, nil
}

func checkFields(expr string) (string, error) {
	if expr == "" {
		return "", invalidCron("cron is empty: give 5 fields (minute hour day-of-month month day-of-week), such as \"30 2 * * *\", or a descriptor such as @hourly or @daily")
	}
	if strings.HasPrefix(expr, "@") {
		d := descriptors()
		f, ok := d[strings.ToLower(expr)]
		if !ok {
			names := make([]string, 0, len(d))
			for n := range d {
				names = append(names, n)
			}
			slices.Sort(names)
			return "", invalidCron("%q is not a known descriptor; use one of %s, or 5 fields", expr, strings.Join(names, ", "))
		}
		return f, nil
	}
	parts := strings.Fields(expr)
	if len(parts) != 5 {
		return "", invalidCron("cron has %d fields, want 5: minute hour day-of-month month day-of-week (seconds and years are not supported)", len(parts))
	}
	for i, p := range parts {
		probe := []string{"*", "*", "*", "*", "*"}
		probe[i] = p
		if !gronx.IsValid(strings.Join(probe, " ")) {
			return "", invalidCron("field %d (%s) is %q, which is not valid: use values in %s, with *, lists (1,2), ranges (1-5) and steps (*/15)",
				i+1, fieldNames[i], p, fieldRanges[i])
		}
	}
	fields := strings.Join(parts, " ")
	if !gronx.IsValid(fields) {
		return "", invalidCron("%q is not a valid cron expression", expr)
	}
	return fields, nil
}

// UnmarshalCron rebuilds a Cron that ParseCron accepted when it was stored; only adapters
// call it. It skips the checks, which cost more than a tick of thousands of schedules can
// spend per row.
func UnmarshalCron(expr, timezone string) (Cron, error) {
	loc, err := cachedLocation(timezone)
	if err != nil {
		return Cron{}, err
	}
	fields := expr
	if f, ok := descriptors()[strings.ToLower(expr)]; ok && strings.HasPrefix(expr, "@") {
		fields = f
	}
	return Cron{expr: expr, fields: fields, timezone: timezone, loc: loc}, nil
}

// locations caches loaded zones: time.LoadLocation parses the zone's data on every call.
var locations sync.Map //nolint:gochecknoglobals // a cache of immutable values

func cachedLocation(name string) (*time.Location, error) {
	if l, ok := locations.Load(name); ok {
		return l.(*time.Location), nil //nolint:forcetypeassert // only *time.Location is stored
	}
	loc, err := loadLocation(name)
	if err != nil {
		return nil, err
	}
	locations.Store(name, loc)
	return loc, nil
}

// Expr is the expression as given.
func (c Cron) Expr() string { return c.expr }

// Timezone is the IANA zone name.
func (c Cron) Timezone() string { return c.timezone }

// maxSteps bounds the wall-clock candidates Next looks at: each is a match of the fields, and
// only DST overlaps make one unusable, so a handful is plenty.
const maxSteps = 64

// Next is the first fire time strictly after t.
func (c Cron) Next(t time.Time) (next time.Time, err error) {
	defer func() {
		if r := recover(); r != nil {
			next, err = time.Time{}, fmt.Errorf("cron %q: %v", c.expr, r)
		}
	}()
	w := wall(t.In(c.loc))
	for range maxSteps {
		nw, err := gronx.NextTickAfter(c.fields, w, false)
		if err != nil || !nw.After(w) {
			return time.Time{}, fmt.Errorf("cron %q has no fire time after %s", c.expr, t.Format(time.RFC3339))
		}
		if at := c.instant(nw); at.After(t) {
			return at, nil
		}
		w = nw
	}
	return time.Time{}, fmt.Errorf("cron %q: no fire time found after %s", c.expr, t.Format(time.RFC3339))
}

// Upcoming is the next n fire times strictly after t, in order; fewer when the cron has no
// more (it never fails: a cron ParseCron accepted always has a next fire, but a search that
// gives up ends the list instead of failing it).
func (c Cron) Upcoming(t time.Time, n int) []time.Time {
	out := make([]time.Time, 0, n)
	for at := t; len(out) < n; {
		next, err := c.Next(at)
		if err != nil {
			break
		}
		out = append(out, next)
		at = next
	}
	return out
}

// prev is the last fire time at or before t.
func (c Cron) prev(t time.Time) (time.Time, bool) {
	w, err := gronx.PrevTickBefore(c.fields, wall(t.In(c.loc)), true)
	if err != nil {
		return time.Time{}, false
	}
	at := c.instant(w)
	return at, !at.After(t)
}

// Cutoff returns the latest fire time at or before now, starting from next (a fire time at or
// before now), and the fire time after it (zero when the cron never fires again). Missed fires
// coalesce into the cutoff.
func (c Cron) Cutoff(next, now time.Time) (cutoff, following time.Time) {
	cutoff = next
	for i := 0; ; i++ {
		n, err := c.Next(cutoff)
		if err != nil {
			return cutoff, time.Time{}
		}
		if n.After(now) {
			return cutoff, n
		}
		cutoff = n
		if i == 8 {
			// A long outage: jump to the last fire before now instead of walking every one.
			if p, ok := c.prev(now); ok && p.After(cutoff) {
				cutoff = p
			}
		}
	}
}

// wall is t's wall-clock reading as a UTC time, which has no DST for gronx to trip on.
func wall(t time.Time) time.Time {
	return time.Date(t.Year(), t.Month(), t.Day(), t.Hour(), t.Minute(), t.Second(), t.Nanosecond(), time.UTC)
}

// instant is the moment the zone's clocks read w: the first one when they read it twice, and
// the moment they jumped past it when they never read it.
func (c Cron) instant(w time.Time) time.Time {
	_, before := w.Add(-36 * time.Hour).In(c.loc).Zone()
	_, after := w.Add(36 * time.Hour).In(c.loc).Zone()
	var found []time.Time
	for _, off := range []int{before, after} {
		at := w.Add(-time.Duration(off) * time.Second)
		if wall(at.In(c.loc)).Equal(w) {
			found = append(found, at)
		}
	}
	if len(found) > 0 {
		return slices.MinFunc(found, func(a, b time.Time) int { return a.Compare(b) })
	}
	// A skipped wall time: the first instant whose wall-clock reading is past w.
	lo := w.Add(-time.Duration(max(before, after)) * time.Second)
	hi := w.Add(-time.Duration(min(before, after)) * time.Second)
	for hi.Sub(lo) > time.Second {
		mid := lo.Add(hi.Sub(lo) / 2).Truncate(time.Second)
		if wall(mid.In(c.loc)).After(w) {
			hi = mid
		} else {
			lo = mid
		}
	}
	return hi
}
