package main

import (
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
)

func TestRunBaseline(t *testing.T) {
	t.Parallel()

	// script writes a stand-in for pgbench-step.sh with the given body.
	script := func(t *testing.T, body string) string {
		t.Helper()
		path := filepath.Join(t.TempDir(), "pgbench-step.sh")
		require.NoError(t, os.WriteFile(path, []byte("#!/usr/bin/env bash\nset -eu\n"+body), 0o755))
		return path
	}

	t.Run("KeepsTheResultLines", func(t *testing.T) {
		t.Parallel()
		path := script(t, `echo "noise"
for c in "$@"; do echo "pgbench clients=$c tps=100.5 p50_ms=1.0 p99_ms=2.0 secs=$SECONDS_PER_RUN"; done
`)
		res, err := runBaseline(t.Context(), path, []string{"1", "4"}, 10*time.Second)
		require.NoError(t, err)
		require.Empty(t, res.note)
		require.Equal(t, []string{
			"pgbench clients=1 tps=100.5 p50_ms=1.0 p99_ms=2.0 secs=10",
			"pgbench clients=4 tps=100.5 p50_ms=1.0 p99_ms=2.0 secs=10",
		}, res.lines)
	})

	t.Run("MissingScriptIsANoteNotAnError", func(t *testing.T) {
		t.Parallel()
		path := filepath.Join(t.TempDir(), "nope.sh")
		res, err := runBaseline(t.Context(), path, []string{"1"}, time.Second)
		require.NoError(t, err)
		require.Equal(t, "not measured: "+path+" not found", res.note)
	})

	t.Run("FailureIsANoteWithItsLastLine", func(t *testing.T) {
		t.Parallel()
		path := script(t, "echo first >&2\necho 'psql: connection refused' >&2\nexit 2\n")
		res, err := runBaseline(t.Context(), path, []string{"1"}, time.Second)
		require.NoError(t, err)
		require.Equal(t, "failed: exit status 2: psql: connection refused", res.note)
	})
}

func TestPgPath(t *testing.T) {
	t.Parallel()
	path := pgPath("/usr/bin:/bin")
	require.Contains(t, path, "/usr/local/bin:/usr/bin:/bin")
	require.Equal(t, 15, versionOf("/usr/lib/postgresql/15/bin"))
	require.Equal(t, 0, versionOf("/usr/local/bin"))
}
