package main

import (
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"
)

func TestEnvMap(t *testing.T) {
	t.Parallel()

	m := envMap([]string{"A=1", "B=", "C=x=y", "A=2", "junk", "=nokey", "B=3", "B="})
	require.Equal(t, map[string]string{"A": "2", "C": "x=y"}, m)
}

func TestMergeEnv(t *testing.T) {
	t.Parallel()

	tests := []struct {
		name      string
		parent    []string
		overrides map[string]string
		want      []string
	}{
		{
			name:   "PassesEverythingThrough",
			parent: []string{"PATH=/bin", "OTEL_EXPORTER_OTLP_ENDPOINT=http://c:4318", "SVC_LOG_LEVEL=debug"},
			want:   []string{"PATH=/bin", "OTEL_EXPORTER_OTLP_ENDPOINT=http://c:4318", "SVC_LOG_LEVEL=debug"},
		},
		{
			name:      "OverrideKeepsItsPlace",
			parent:    []string{"PATH=/bin", "SVC_REDIS_URL=", "HOME=/root"},
			overrides: map[string]string{"SVC_REDIS_URL": "redis://r:6379/0"},
			want:      []string{"PATH=/bin", "SVC_REDIS_URL=redis://r:6379/0", "HOME=/root"},
		},
		{
			name:      "NewKeysSortedAtTheEnd",
			parent:    []string{"PATH=/bin"},
			overrides: map[string]string{"SVC_B": "2", "SVC_A": "1"},
			want:      []string{"PATH=/bin", "SVC_A=1", "SVC_B=2"},
		},
		{
			name:   "DuplicatesCollapseLastWins",
			parent: []string{"X=1", "Y=2", "X=3", "broken"},
			want:   []string{"X=3", "Y=2"},
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			require.Equal(t, tt.want, mergeEnv(tt.parent, tt.overrides))
		})
	}
}

func TestResolveEndpoints(t *testing.T) {
	t.Parallel()

	t.Run("Defaults", func(t *testing.T) {
		t.Parallel()
		e, err := resolveEndpoints(map[string]string{})
		require.NoError(t, err)
		require.Equal(t, ":8090", e.gatewayAdmin)
		require.Equal(t, map[string]string{
			"SVC_PUBLIC_ADDR":        ":8080",
			"SVC_GATEWAY_ADMIN_ADDR": ":8090",
			"SVC_IDENTITY_ADDR":      ":8081",
			"SVC_EDITOR_ADDR":        ":8082",
			"SVC_ORCHESTRATOR_ADDR":  ":8083",
			"SVC_SCHEDULER_ADDR":     ":8084",
			"SVC_WEBHOOK_ADDR":       ":8085",
			"SVC_IDENTITY_URL":       "http://127.0.0.1:8081",
			"SVC_EDITOR_URL":         "http://127.0.0.1:8082",
			"SVC_ORCHESTRATOR_URL":   "http://127.0.0.1:8083",
			"SVC_SCHEDULER_URL":      "http://127.0.0.1:8084",
			"SVC_WEBHOOK_URL":        "http://127.0.0.1:8085",
		}, e.vars)
		require.Equal(t, ":8080", e.addr["gateway"])
	})

	t.Run("MovedAddressMovesItsURL", func(t *testing.T) {
		t.Parallel()
		e, err := resolveEndpoints(map[string]string{"SVC_EDITOR_ADDR": "127.0.0.2:9082"})
		require.NoError(t, err)
		require.Equal(t, "127.0.0.2:9082", e.addr["workflow-editor"])
		require.Equal(t, "http://127.0.0.2:9082", e.vars["SVC_EDITOR_URL"])
	})

	t.Run("UserURLWins", func(t *testing.T) {
		t.Parallel()
		e, err := resolveEndpoints(map[string]string{
			"SVC_SCHEDULER_ADDR": ":9084",
			"SVC_SCHEDULER_URL":  "http://sched.internal:80",
		})
		require.NoError(t, err)
		require.Equal(t, ":9084", e.vars["SVC_SCHEDULER_ADDR"])
		require.Equal(t, "http://sched.internal:80", e.vars["SVC_SCHEDULER_URL"])
	})

	t.Run("BadAddressNamesTheVariable", func(t *testing.T) {
		t.Parallel()
		_, err := resolveEndpoints(map[string]string{"SVC_WEBHOOK_ADDR": "8085"})
		require.ErrorContains(t, err, "SVC_WEBHOOK_ADDR")
	})
}

func TestBaseURL(t *testing.T) {
	t.Parallel()

	tests := []struct {
		addr    string
		want    string
		wantErr bool
	}{
		{addr: ":8080", want: "http://localhost:8080"},
		{addr: "0.0.0.0:9000", want: "http://localhost:9000"},
		{addr: "[::]:8080", want: "http://localhost:8080"},
		{addr: "127.0.0.1:8080", want: "http://127.0.0.1:8080"},
		{addr: "[::1]:8080", want: "http://[::1]:8080"},
		{addr: "svc.local:80", want: "http://svc.local:80"},
		{addr: "8080", wantErr: true},
		{addr: ":0", wantErr: true},
	}
	for _, tt := range tests {
		t.Run(tt.addr, func(t *testing.T) {
			t.Parallel()
			got, err := baseURL(tt.addr)
			if tt.wantErr {
				require.Error(t, err)
				return
			}
			require.NoError(t, err)
			require.Equal(t, tt.want, got)
		})
	}
}

func TestInternalSecret(t *testing.T) {
	t.Parallel()

	t.Run("GeneratedAndKept", func(t *testing.T) {
		t.Parallel()
		dir := filepath.Join(t.TempDir(), ".devstack") // not there yet
		first, err := internalSecret(map[string]string{}, dir)
		require.NoError(t, err)
		require.True(t, first.fresh)
		require.GreaterOrEqual(t, len(first.value), minSecretLen)
		file := filepath.Join(dir, secretFile)
		require.Equal(t, file, first.file)
		info, err := os.Stat(file)
		require.NoError(t, err)
		require.Equal(t, os.FileMode(0o600), info.Mode().Perm(), "only its owner reads it")

		// The next start uses it again: cookies signed before the restart stay valid.
		again, err := internalSecret(map[string]string{}, dir)
		require.NoError(t, err)
		require.Equal(t, secret{value: first.value, file: file}, again)

		// Another state folder, another secret.
		other, err := internalSecret(map[string]string{}, t.TempDir())
		require.NoError(t, err)
		require.NotEqual(t, first.value, other.value)

		entries, err := os.ReadDir(dir)
		require.NoError(t, err)
		require.Len(t, entries, 1, "no temporary file is left beside it")
	})

	t.Run("UsersWinsAndTouchesNoFile", func(t *testing.T) {
		t.Parallel()
		dir := t.TempDir()
		require.NoError(t, os.WriteFile(filepath.Join(dir, secretFile), []byte(strings.Repeat("f", 64)+"\n"), 0o600))
		want := strings.Repeat("k", 32)
		got, err := internalSecret(map[string]string{envInternalSecret: want}, dir)
		require.NoError(t, err)
		require.Equal(t, secret{value: want}, got)

		empty := t.TempDir()
		_, err = internalSecret(map[string]string{envInternalSecret: want}, empty)
		require.NoError(t, err)
		entries, err := os.ReadDir(empty)
		require.NoError(t, err)
		require.Empty(t, entries, "nothing is written when the environment sets it")
	})

	t.Run("TooShort", func(t *testing.T) {
		t.Parallel()
		_, err := internalSecret(map[string]string{envInternalSecret: "short"}, t.TempDir())
		require.ErrorContains(t, err, envInternalSecret)
	})

	t.Run("KeptFileTooShort", func(t *testing.T) {
		t.Parallel()
		dir := t.TempDir()
		file := filepath.Join(dir, secretFile)
		require.NoError(t, os.WriteFile(file, []byte("short\n"), 0o600))
		_, err := internalSecret(map[string]string{}, dir)
		require.ErrorContains(t, err, file)
		require.ErrorContains(t, err, "delete it")
	})
}

func TestSelectServices(t *testing.T) {
	t.Parallel()

	all, err := selectServices(nil)
	require.NoError(t, err)
	require.Len(t, all, 6)
	require.Equal(t, "gateway", all[len(all)-1].name, "the gateway starts last")

	some, err := selectServices([]string{"gateway", "identity"})
	require.NoError(t, err)
	require.Equal(t, "identity, gateway", serviceNames(some), "start order, not flag order")

	_, err = selectServices([]string{"identity", "nope"})
	require.ErrorContains(t, err, `"nope"`)
}
