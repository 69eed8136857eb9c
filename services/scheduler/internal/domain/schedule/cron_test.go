package schedule_test

import (
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"svc.dev/services/scheduler/internal/domain/schedule"
)

func mustCron(t *testing.T, expr, tz string) schedule.Cron {
	t.Helper()
	c, err := schedule.ParseCron(expr, tz)
	require.NoError(t, err)
	return c
}

// fires lists every fire time in (from, to] by walking Next.
func fires(t *testing.T, c schedule.Cron, span [2]time.Time) []time.Time {
	t.Helper()
	from, to := span[0], span[1]
	var out []time.Time
	for at := from; ; {
		next, err := c.Next(at)
		require.NoError(t, err)
		if next.After(to) {
			return out
		}
		require.True(t, next.After(at), "Next(%s) = %s does not move forward", at, next)
		out = append(out, next)
		at = next
	}
}

func TestNextAcrossDST(t *testing.T) {
	t.Parallel()
	ny, err := time.LoadLocation("America/New_York")
	require.NoError(t, err)
	day := func(y int, m time.Month, d int) [2]time.Time {
		return [2]time.Time{time.Date(y, m, d, 0, 0, 0, 0, ny), time.Date(y, m, d+1, 0, 0, 0, 0, ny)}
	}

	t.Run("SpringForwardSkippedTimeFiresOnceWhenClocksJump", func(t *testing.T) {
		t.Parallel()
		// 2026-03-08: 02:00 EST jumps to 03:00 EDT; 02:30 does not exist that day.
		c := mustCron(t, "30 2 * * *", "America/New_York")
		got := fires(t, c, day(2026, time.March, 8))
		require.Len(t, got, 1)
		require.Equal(t, time.Date(2026, 3, 8, 7, 0, 0, 0, time.UTC), got[0].UTC(), "03:00 EDT, the moment the clocks jumped past 02:30")
		// The days around it fire at 02:30 local as usual.
		require.Equal(t, []time.Time{time.Date(2026, 3, 7, 7, 30, 0, 0, time.UTC)}, utc(fires(t, c, day(2026, time.March, 7))))
		require.Equal(t, []time.Time{time.Date(2026, 3, 9, 6, 30, 0, 0, time.UTC)}, utc(fires(t, c, day(2026, time.March, 9))))
	})

	t.Run("FallBackFiresOnce", func(t *testing.T) {
		t.Parallel()
		// 2026-11-01: 02:00 EDT falls back to 01:00 EST; 02:30 happens once (EST).
		c := mustCron(t, "30 2 * * *", "America/New_York")
		got := fires(t, c, day(2026, time.November, 1))
		require.Equal(t, []time.Time{time.Date(2026, 11, 1, 7, 30, 0, 0, time.UTC)}, utc(got))
	})

	t.Run("RepeatedWallTimeFiresOnceAtItsFirstOccurrence", func(t *testing.T) {
		t.Parallel()
		// 01:30 happens twice on 2026-11-01: at 05:30 UTC (EDT) and 06:30 UTC (EST).
		c := mustCron(t, "30 1 * * *", "America/New_York")
		got := fires(t, c, day(2026, time.November, 1))
		require.Equal(t, []time.Time{time.Date(2026, 11, 1, 5, 30, 0, 0, time.UTC)}, utc(got))
		// Asked from inside the repeated hour (01:10 EST), the next fire is the next day's.
		next, err := c.Next(time.Date(2026, 11, 1, 6, 10, 0, 0, time.UTC))
		require.NoError(t, err)
		require.Equal(t, time.Date(2026, 11, 2, 6, 30, 0, 0, time.UTC), next.UTC())
	})

	t.Run("HourlyKeepsEveryRealHour", func(t *testing.T) {
		t.Parallel()
		c := mustCron(t, "@hourly", "America/New_York")
		require.Len(t, fires(t, c, day(2026, time.March, 8)), 23, "a 23-hour day")
		require.Len(t, fires(t, c, day(2026, time.November, 1)), 24, "a 25-hour day: the repeated 01:00 fires once")
	})
}

func utc(ts []time.Time) []time.Time {
	out := make([]time.Time, len(ts))
	for i, t := range ts {
		out[i] = t.UTC()
	}
	return out
}

func TestCutoffCoalescesMissedFires(t *testing.T) {
	t.Parallel()
	c := mustCron(t, "*/5 * * * *", "UTC")
	first := time.Date(2026, 11, 22, 10, 0, 0, 0, time.UTC)

	cutoff, next := c.Cutoff(first, first)
	require.Equal(t, first, cutoff)
	require.Equal(t, first.Add(5*time.Minute), next)

	// Down for 3 hours and a bit: one cutoff, the last fire time at or before now.
	now := first.Add(3*time.Hour + 7*time.Minute)
	cutoff, next = c.Cutoff(first, now)
	require.Equal(t, first.Add(3*time.Hour+5*time.Minute), cutoff)
	require.Equal(t, first.Add(3*time.Hour+10*time.Minute), next)

	// Down for a month: same, without walking every fire.
	now = first.Add(31*24*time.Hour + 2*time.Minute)
	cutoff, next = c.Cutoff(first, now)
	require.Equal(t, first.Add(31*24*time.Hour), cutoff)
	require.Equal(t, first.Add(31*24*time.Hour+5*time.Minute), next)
}

// TestUpcoming: the preview's fire times are Next walked from the start, DST rules included.
func TestUpcoming(t *testing.T) {
	t.Parallel()
	c := mustCron(t, "30 2 * * *", "America/New_York")
	from := time.Date(2026, 3, 6, 12, 0, 0, 0, time.UTC)
	require.Equal(t, []time.Time{
		time.Date(2026, 3, 7, 7, 30, 0, 0, time.UTC),
		time.Date(2026, 3, 8, 7, 0, 0, 0, time.UTC), // 02:30 is skipped: 03:00 EDT
		time.Date(2026, 3, 9, 6, 30, 0, 0, time.UTC),
	}, utc(c.Upcoming(from, 3)))
	require.Empty(t, c.Upcoming(from, 0))
	// A fire time is never the start itself.
	at := time.Date(2026, 3, 7, 7, 30, 0, 0, time.UTC)
	require.Equal(t, time.Date(2026, 3, 8, 7, 0, 0, 0, time.UTC), c.Upcoming(at, 1)[0].UTC())
	// A leap day: five of them, four years apart.
	leap := mustCron(t, "0 12 29 2 *", "UTC").Upcoming(from, 5)
	require.Len(t, leap, 5)
	require.Equal(t, 2028, leap[0].Year())
	require.Equal(t, 2044, leap[4].Year())
}

func TestParseCron(t *testing.T) {
	t.Parallel()
	for _, ok := range []string{"* * * * *", "30 2 * * *", "*/15 9-17 * * MON-FRI", "0 0 1 1 *", "@hourly", "@daily", "@weekly", "@monthly", "@yearly", "@annually", "@midnight", "0 12 29 2 *", " 5 4 * * sun "} {
		_, err := schedule.ParseCron(ok, "Europe/Paris")
		require.NoError(t, err, ok)
	}
	for _, tc := range []struct{ expr, tz, says string }{
		{"", "UTC", "cron is empty"},
		{"* * * *", "UTC", "4 fields, want 5"},
		{"0 * * * * *", "UTC", "6 fields, want 5"},
		{"0 0 * * * 2026", "UTC", "6 fields"},
		{"60 * * * *", "UTC", `field 1 (minute) is "60"`},
		{"0 24 * * *", "UTC", `field 2 (hour) is "24"`},
		{"0 0 32 * *", "UTC", `field 3 (day-of-month)`},
		{"0 0 * 13 *", "UTC", `field 4 (month)`},
		{"0 0 * * 9", "UTC", `field 5 (day-of-week)`},
		{"x y z w v", "UTC", `field 1 (minute) is "x"`},
		{"0 0 30 2 *", "UTC", "never matches a date"},
		{"@sometimes", "UTC", "not a known descriptor"},
		{"@everysecond", "UTC", "not a known descriptor"},
		{"* * * * *", "Mars/Olympus", `timezone "Mars/Olympus" is not an IANA time zone name`},
		{"* * * * *", "Local", "not an IANA"},
		{"* * * * *", "../../etc/passwd", "not an IANA"},
	} {
		_, err := schedule.ParseCron(tc.expr, tc.tz)
		var ic *schedule.InvalidCronError
		require.ErrorAs(t, err, &ic, "%q %q", tc.expr, tc.tz)
		require.Contains(t, ic.Message, tc.says, "%q %q", tc.expr, tc.tz)
	}
	// A long timezone is named in the answer by its first 64 bytes only.
	_, err := schedule.ParseCron("* * * * *", strings.Repeat("Europe/", 100_000))
	var ic *schedule.InvalidCronError
	require.ErrorAs(t, err, &ic)
	require.Less(t, len(ic.Message), 300, "the message echoes the whole timezone")
}

// FuzzParseCron: no expression or timezone a client sends panics or yields a cron whose Next
// does not move forward.
func FuzzParseCron(f *testing.F) {
	for _, s := range []string{"* * * * *", "*/0 * * * *", "0 0 L * *", "0 0 ? * 5#3", "1-60/7 * * * *", "@daily", "0 0 31 2,4 *"} {
		f.Add(s, "UTC")
	}
	f.Add("30 2 * * *", "America/New_York")
	f.Fuzz(func(t *testing.T, expr, tz string) {
		c, err := schedule.ParseCron(expr, tz)
		if err != nil {
			var ic *schedule.InvalidCronError
			require.ErrorAs(t, err, &ic)
			return
		}
		at := time.Date(2026, 11, 22, 2, 6, 44, 0, time.UTC)
		next, err := c.Next(at)
		if err == nil {
			require.True(t, next.After(at))
		}
	})
}
