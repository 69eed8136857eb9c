package http

import (
	"net/http/httptest"
	"testing"

	"github.com/stretchr/testify/require"
)

func TestIsEventStream(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		method, path string
		want         bool
	}{
		{"GET", "/api/runs/events", true},
		{"GET", "/api/runs/run_1/events", true},
		{"POST", "/api/runs/run_1/events", false},
		{"GET", "/api/runs/run_1/logs", false},
		{"GET", "/api/runs/run_1/x/events", false},
		{"GET", "/api/runs//events", false},
		{"GET", "/api/runs/xevents", false},
		{"GET", "/api/workflows/events", false},
	} {
		r := httptest.NewRequest(tc.method, tc.path, nil)
		require.Equal(t, tc.want, isEventStream(r), "%s %s", tc.method, tc.path)
	}
}

func TestStreamSlotsPerPrincipal(t *testing.T) {
	t.Parallel()
	s := streams{max: 2, open: map[string]int{}}
	require.True(t, s.acquire("a"))
	require.True(t, s.acquire("a"))
	require.False(t, s.acquire("a"), "past the cap")
	require.True(t, s.acquire("b"), "another principal has slots of its own")
	s.release("a")
	require.True(t, s.acquire("a"), "a closed stream gives its slot back")
	s.release("a")
	s.release("a")
	s.release("b")
	require.Empty(t, s.open)
}
