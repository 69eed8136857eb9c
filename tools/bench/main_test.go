package main

import (
	"os"
	"path/filepath"
	"slices"
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
		require.Equal(t, scenarioNames(slices.DeleteFunc(allScenarios(), byNameOnly)), scenarioNames(cfg.scenarios),
			"no -scenario: every one but those run only by name, in allScenarios' order")
		require.Equal(t, []string{"gateway-proxy", "guard-reject", "guard-overhead", "patch-100-ops", "patch-1000-blocks", "run-start", "chain-40"}, scenarioNames(cfg.scenarios)[:7])
		require.Equal(t, 10*time.Second, cfg.duration)
		require.Equal(t, 2*time.Second, cfg.warmup)
		require.InDelta(t, 500, cfg.rate, 0)
		require.False(t, cfg.noSystem)
		require.Equal(t, "http://127.0.0.1:18080", cfg.gatewayURL)
		require.Equal(t, "http://127.0.0.1:18081", cfg.identityURL)
		require.Equal(t, "http://127.0.0.1:18082", cfg.editorURL)
		require.Equal(t, "http://bench.test", cfg.origin, "the system bench starts trusts it")
		require.Equal(t, map[string]float64{
			"gateway-proxy": 500, "guard-reject": 500, "guard-overhead": 500, "patch-100-ops": 50, "patch-1000-blocks": 20, "run-start": 200, "chain-40": 500,
		}, only(ratesOf(cfg), 7), "heavy scenarios keep their own rate")
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
		require.Equal(t, "http://127.0.0.1:8082", cfg.editorURL, "make run's editor")
		require.Equal(t, "http://localhost:8080", cfg.origin, "identity's default public URL")
		require.Equal(t, "/tmp/r.md", cfg.resultsPath)
		require.True(t, cfg.noBaseline)
	})

	t.Run("Rates", func(t *testing.T) {
		t.Parallel()
		tests := []struct {
			name string
			args []string
			want map[string]float64
		}{
			{"RateBeatsTheScenariosOwn", []string{"-rate", "100"}, map[string]float64{
				"gateway-proxy": 100, "guard-reject": 100, "guard-overhead": 100, "patch-100-ops": 100, "patch-1000-blocks": 100, "run-start": 100, "chain-40": 100,
			}},
			{"ScenarioRateBeatsEverything", []string{"-rate", "100", "-scenario-rate", "patch-100-ops=80, guard-reject=7.5"}, map[string]float64{
				"gateway-proxy": 100, "guard-reject": 7.5, "guard-overhead": 100, "patch-100-ops": 80, "patch-1000-blocks": 100, "run-start": 100, "chain-40": 100,
			}},
			{"ScenarioRateAlone", []string{"-scenario-rate", "patch-1000-blocks=5"}, map[string]float64{
				"gateway-proxy": 500, "guard-reject": 500, "guard-overhead": 500, "patch-100-ops": 50, "patch-1000-blocks": 5, "run-start": 200, "chain-40": 500,
			}},
		}
		for _, tt := range tests {
			t.Run(tt.name, func(t *testing.T) {
				t.Parallel()
				bundle := setup(t)
				cfg, err := parseConfig(tt.args, bundle.getwd)
				require.NoError(t, err)
				require.Equal(t, tt.want, only(ratesOf(cfg), len(tt.want)))
			})
		}
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
			{"EditorURLWithoutNoSystem", []string{"-editor-url", "http://x"}, "need -no-system"},
			{"OriginWithoutNoSystem", []string{"-origin", "http://x"}, "need -no-system"},
			{"RateOfAnUnknownScenario", []string{"-scenario-rate", "runs=5"}, `unknown scenario "runs"`},
			{"RateWithoutName", []string{"-scenario-rate", "50"}, "is not name=rate"},
			{"ZeroScenarioRate", []string{"-scenario-rate", "patch-100-ops=0"}, "must be a positive number"},
			{"ScenarioRateNotANumber", []string{"-scenario-rate", "patch-100-ops=fast"}, "must be a positive number"},
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

// ratesOf is the rate each selected scenario of cfg runs at.
// only keeps the rates of the first n scenarios of allScenarios, the ones a test lists; the
// scenarios added later have tests of their own.
func only(rates map[string]float64, n int) map[string]float64 {
	out := map[string]float64{}
	for _, name := range scenarioNames(allScenarios())[:n] {
		if r, ok := rates[name]; ok {
			out[name] = r
		}
	}
	return out
}

func ratesOf(cfg config) map[string]float64 {
	out := map[string]float64{}
	for _, s := range cfg.scenarios {
		out[s.Name()] = cfg.rateFor(s)
	}
	return out
}
