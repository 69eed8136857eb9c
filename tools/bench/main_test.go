package main

import (
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
)

func TestParseConfig(t *testing.T) {
	t.Parallel()

	type testBundle struct {
		root  string
		getwd func() (string, error)
	}

	// setup makes a repository root with go.work and works from a folder below it.
	setup := func(t *testing.T) *testBundle {
		t.Helper()
		root := t.TempDir()
		require.NoError(t, os.WriteFile(filepath.Join(root, "go.work"), []byte("go 1.26\n"), 0o644))
		sub := filepath.Join(root, "tools", "bench")
		require.NoError(t, os.MkdirAll(sub, 0o755))
		return &testBundle{root: root, getwd: func() (string, error) { return sub, nil }}
	}

	t.Run("Defaults", func(t *testing.T) {
		t.Parallel()
		bundle := setup(t)

		cfg, err := parseConfig(nil, bundle.getwd)
		require.NoError(t, err)
		require.Equal(t, bundle.root, cfg.root)
		require.Equal(t, []string{"gateway-proxy", "guard-reject"}, scenarioNames(cfg.scenarios))
		require.Equal(t, 10*time.Second, cfg.duration)
		require.Equal(t, 2*time.Second, cfg.warmup)
		require.InDelta(t, 500, cfg.rate, 0)
		require.False(t, cfg.noSystem)
		require.Equal(t, "http://127.0.0.1:18080", cfg.gatewayURL)
		require.Equal(t, "http://127.0.0.1:18081", cfg.identityURL)
		require.Equal(t, filepath.Join(bundle.root, "bench", "RESULTS.md"), cfg.resultsPath)
		require.False(t, cfg.noBaseline)
	})

	t.Run("Flags", func(t *testing.T) {
		t.Parallel()
		bundle := setup(t)

		cfg, err := parseConfig([]string{
			"-scenario", "guard-reject, gateway-proxy,guard-reject", "-duration", "3s", "-rate", "50",
			"-no-system", "-url", "http://10.0.0.1:8080/", "-results", "/tmp/r.md", "-no-baseline",
		}, bundle.getwd)
		require.NoError(t, err)
		require.Equal(t, []string{"guard-reject", "gateway-proxy"}, scenarioNames(cfg.scenarios), "given order, no repeats")
		require.Equal(t, 3*time.Second, cfg.duration)
		require.InDelta(t, 50, cfg.rate, 0)
		require.True(t, cfg.noSystem)
		require.Equal(t, "http://10.0.0.1:8080", cfg.gatewayURL)
		require.Equal(t, "http://127.0.0.1:8081", cfg.identityURL, "make run's identity")
		require.Equal(t, "/tmp/r.md", cfg.resultsPath)
		require.True(t, cfg.noBaseline)
	})

	t.Run("Invalid", func(t *testing.T) {
		t.Parallel()
		tests := []struct {
			name string
			args []string
			want string
		}{
			{"UnknownScenario", []string{"-scenario", "runs"}, `unknown scenario "runs"`},
			{"ZeroDuration", []string{"-duration", "0s"}, "-duration must be positive"},
			{"NegativeRate", []string{"-rate", "-1"}, "-rate must be positive"},
			{"URLWithoutNoSystem", []string{"-url", "http://x"}, "need -no-system"},
			{"StrayArgument", []string{"extra"}, "unexpected arguments"},
		}
		for _, tt := range tests {
			t.Run(tt.name, func(t *testing.T) {
				t.Parallel()
				bundle := setup(t)
				_, err := parseConfig(tt.args, bundle.getwd)
				require.ErrorContains(t, err, tt.want)
			})
		}
	})

	t.Run("NoRepository", func(t *testing.T) {
		t.Parallel()
		_, err := parseConfig(nil, func() (string, error) { return t.TempDir(), nil })
		require.ErrorContains(t, err, "no go.work")
	})
}
