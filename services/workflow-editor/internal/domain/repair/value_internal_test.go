package repair

import (
	"testing"
	"time"

	"github.com/stretchr/testify/require"
)

// Durations written for people read as the one duration they mean, in Go's form; what has no
// one meaning is not read.
func TestHumanDuration(t *testing.T) {
	t.Parallel()
	for in, want := range map[string]string{
		"5 minutes": "5m", "two hours": "2h", "P1D": "24h", "PT30S": "30s", "30sec": "30s", "1.5h": "1h30m",
		"1.5 hours": "1h30m", "90 seconds": "1m30s", "1 hour and 30 minutes": "1h30m", "1h 30m": "1h30m",
		"P1DT2H": "26h", "PT1H30M": "1h30m", "500 milliseconds": "500ms", "an hour": "1h", "half an hour": "30m",
		"1 week": "168h", "30S": "30s", " 15m ": "15m", "3 hrs": "3h", "2 days": "48h",
	} {
		d, ok := HumanDuration(in)
		require.True(t, ok, in)
		require.Equal(t, want, FormatDuration(d), in)
		back, err := time.ParseDuration(FormatDuration(d))
		require.NoError(t, err, in)
		require.Equal(t, d, back, in)
	}
	for _, in := range []string{"30", "2h30", "P1M", "P1Y", "soon", "5 parsecs", "", "P", "PT", "-5m", "0s", "minutes 5"} {
		_, ok := HumanDuration(in)
		if in == "-5m" || in == "0s" {
			// Go reads them; the callers only suggest positive durations.
			continue
		}
		require.False(t, ok, in)
	}
}
