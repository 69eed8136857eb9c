package run_test

import (
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"svc.dev/services/run-orchestrator/internal/domain/run"
)

func TestParseRetention(t *testing.T) {
	server := 720 * time.Hour
	for in, want := range map[string]time.Duration{
		"168h": 168 * time.Hour, "90m": 90 * time.Minute, "1m": time.Minute, "30d": server, " 7d ": 7 * 24 * time.Hour, "1h30m": 90 * time.Minute,
	} {
		got, err := run.ParseRetention(in, server)
		require.NoError(t, err, in)
		require.Equal(t, want, got, in)
	}
	for in, msg := range map[string]string{
		"59s": "at least 1m", "31d": "at most the server's period, 720h", "721h": "at most", "": "not a duration",
		"soon": "not a duration", "-5m": "not a duration", "1.5d": "not a duration", "99999999999d": "not a duration",
	} {
		_, err := run.ParseRetention(in, server)
		var ie *run.InvalidRetentionError
		require.ErrorAs(t, err, &ie, in)
		require.Contains(t, ie.Message, msg, in)
	}
}

func TestFormatRetentionReadsBack(t *testing.T) {
	for d, want := range map[time.Duration]string{
		720 * time.Hour: "720h", 90 * time.Minute: "1h30m", time.Minute: "1m", 61 * time.Second: "1m1s", time.Hour + time.Second: "1h1s",
	} {
		require.Equal(t, want, run.FormatRetention(d))
		back, err := run.ParseRetention(want, 1000*time.Hour)
		require.NoError(t, err)
		require.Equal(t, d, back)
	}
}

func TestRetentionEffective(t *testing.T) {
	require.Equal(t, 720*time.Hour, run.Retention{Server: 720 * time.Hour}.Effective())
	require.Equal(t, time.Hour, run.Retention{Server: 720 * time.Hour, Override: time.Hour}.Effective())
	// The server's period lowered below an organization's override wins.
	require.Equal(t, 2*time.Hour, run.Retention{Server: 2 * time.Hour, Override: 24 * time.Hour}.Effective())
}
