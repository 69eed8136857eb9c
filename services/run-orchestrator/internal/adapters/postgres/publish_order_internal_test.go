package postgres

import (
	"testing"
	"time"

	"github.com/stretchr/testify/require"
)

// TestPublishOrderHoldsTheRunsNextCommit: a run's next commit cannot publish before the one
// holding the run's turn has; other runs are not held; the turns leave nothing behind.
func TestPublishOrderHoldsTheRunsNextCommit(t *testing.T) {
	t.Parallel()
	var p publishOrder
	first := p.hold("run_a")

	other := make(chan struct{})
	go func() { p.hold("run_b")(); close(other) }()
	select {
	case <-other:
	case <-time.After(10 * time.Second):
		t.Fatal("another run's commit waited for run_a's turn")
	}

	second := make(chan struct{})
	go func() {
		release := p.hold("run_a")
		close(second)
		release()
	}()
	select {
	case <-second:
		t.Fatal("run_a's next commit took the turn before the first one published")
	case <-time.After(50 * time.Millisecond): // the second holder is still waiting: the point of the test
	}
	first()
	select {
	case <-second:
	case <-time.After(10 * time.Second):
		t.Fatal("run_a's next commit never got the turn")
	}
	require.Eventually(t, func() bool {
		p.mu.Lock()
		defer p.mu.Unlock()
		return len(p.runs) == 0
	}, 10*time.Second, time.Millisecond)
}
