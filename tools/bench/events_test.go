package main

import (
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
)

func TestReadSSE(t *testing.T) {
	t.Parallel()
	stream := ": heartbeat\n\n" +
		"id: 3.0\nevent: attempt.started\ndata: {\"a\":1}\n\n" +
		"event: run.status\ndata: line one\ndata:line two\n\n" +
		": heartbeat\n\n" +
		"id: 9.4\nevent: run.status\ndata: {}\n" // no closing blank line: not an event
	clock := time.Date(2026, 1, 2, 3, 4, 5, 0, time.UTC)
	now := func() time.Time { clock = clock.Add(time.Millisecond); return clock }
	var got []sseEvent
	err := readSSE(strings.NewReader(stream), now, func(e sseEvent) bool { got = append(got, e); return true })
	require.NoError(t, err)
	require.Equal(t, []sseEvent{
		{id: "3.0", kind: "attempt.started", data: `{"a":1}`, at: time.Date(2026, 1, 2, 3, 4, 5, 1e6, time.UTC)},
		{kind: "run.status", data: "line one\nline two", at: time.Date(2026, 1, 2, 3, 4, 5, 2e6, time.UTC)},
	}, got, "comments skipped; each event stamped when its blank line is read")

	n := 0
	require.NoError(t, readSSE(strings.NewReader(stream), now, func(sseEvent) bool { n++; return false }))
	require.Equal(t, 1, n, "fn returning false stops the read")
}

func TestAttemptStamp(t *testing.T) {
	t.Parallel()
	data := `{"runId":"run_x","seq":4,"status":"succeeded","startedAt":"2026-01-02T03:04:05.100Z","finishedAt":"2026-01-02T03:04:05.250Z"}`
	ts, ok, err := attemptStamp(sseEvent{kind: "attempt.started", data: data})
	require.NoError(t, err)
	require.True(t, ok)
	require.Equal(t, time.Date(2026, 1, 2, 3, 4, 5, 100e6, time.UTC), ts)

	ts, ok, err = attemptStamp(sseEvent{kind: "attempt.finished", data: data})
	require.NoError(t, err)
	require.True(t, ok)
	require.Equal(t, time.Date(2026, 1, 2, 3, 4, 5, 250e6, time.UTC), ts, "finishedAt for attempt.finished")

	_, ok, err = attemptStamp(sseEvent{kind: "run.status", data: `{"status":"running"}`})
	require.NoError(t, err)
	require.False(t, ok, "not an attempt event")

	_, _, err = attemptStamp(sseEvent{kind: "attempt.finished", id: "5.2", data: `{"startedAt":"2026-01-02T03:04:05.100Z"}`})
	require.ErrorContains(t, err, "no timestamp")
	_, _, err = attemptStamp(sseEvent{kind: "attempt.started", data: `{`})
	require.ErrorContains(t, err, "decode")
}

func TestConsume(t *testing.T) {
	t.Parallel()
	base := time.Date(2026, 1, 2, 3, 4, 5, 0, time.UTC)
	at := func(ms int) string {
		return base.Add(time.Duration(ms) * time.Millisecond).Format("2006-01-02T15:04:05.000Z")
	}
	ev := func(kind, data string) string { return "event: " + kind + "\ndata: " + data + "\n\n" }
	// The client reads every event at base+300ms; the stream opened at base+100ms.
	now := func() time.Time { return base.Add(300 * time.Millisecond) }
	opened := base.Add(100 * time.Millisecond)

	t.Run("LiveAndReplayed", func(t *testing.T) {
		t.Parallel()
		stream := ev("attempt.started", `{"startedAt":"`+at(10)+`"}`) + // before the stream opened: replayed
			ev("attempt.finished", `{"startedAt":"`+at(10)+`","finishedAt":"`+at(290)+`"}`) +
			ev("attempt.started", `{"startedAt":"`+at(295)+`"}`) +
			ev("run.status", `{"status":"running"}`) +
			ev("run.status", `{"status":"completed"}`) +
			ev("attempt.started", `{"startedAt":"`+at(299)+`"}`) // after the final status: not read
		r := consume(strings.NewReader(stream), opened, now)
		require.NoError(t, r.err)
		require.Equal(t, "completed", r.final)
		require.Equal(t, 1, r.replayed)
		require.Equal(t, []time.Duration{5 * time.Millisecond}, r.started)
		require.Equal(t, []time.Duration{10 * time.Millisecond}, r.finished)
	})
	t.Run("EndsEarly", func(t *testing.T) {
		t.Parallel()
		r := consume(strings.NewReader(ev("run.status", `{"status":"running"}`)), opened, now)
		require.ErrorContains(t, r.err, "before the run's final status")
	})
	t.Run("BadData", func(t *testing.T) {
		t.Parallel()
		r := consume(strings.NewReader(ev("attempt.finished", `{"status":"failed"}`)), opened, now)
		require.ErrorContains(t, r.err, "no timestamp")
	})
}

func TestEventFinding(t *testing.T) {
	t.Parallel()
	ms := time.Millisecond
	tally := &eventTally{runs: 1000, completed: 1000, started: make([]time.Duration, 3000), finished: make([]time.Duration, 3500), replayed: 500}
	note := eventFinding(100, Stats{}, tally, Stats{P50: 4 * ms, P90: 8 * ms, P99: 20 * ms, Max: 60 * ms})
	require.Contains(t, note, "p99 ≤ 50 ms")
	require.Contains(t, note, "p50 4.000 / p90 8.000 / p99 20.000 / max 60.000 ms, met")
	require.Contains(t, note, "1000 runs measured (1000 completed), 0 streams failed, 6500 attempt events delivered live")
	require.Contains(t, note, "upper bound")

	note = eventFinding(100, Stats{}, tally, Stats{P99: 51 * ms})
	require.Contains(t, note, "MISSED")

	failing := &eventTally{runs: 10, completed: 9, failed: 1, firstErr: "x"}
	failing.add(streamResult{err: errors.New("429")})
	require.Equal(t, 2, failing.failed)
	require.Equal(t, "x", failing.firstErr, "the first error is kept")
	require.Contains(t, eventFinding(100, Stats{}, failing, Stats{}), "not checked")
	require.Contains(t, eventFinding(100, Stats{StatusErrors: 1}, tally, Stats{}), "not checked")
}
