package postgres_test

import (
	"context"
	"errors"
	"log/slog"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"svc.dev/services/identity/internal/adapters/postgres"
)

type fakeStore struct {
	mu      sync.Mutex
	fail    bool
	batches []map[string]time.Time
}

func (f *fakeStore) Touch(_ context.Context, uses map[string]time.Time) error {
	f.mu.Lock()
	defer f.mu.Unlock()
	if f.fail {
		return errors.New("down")
	}
	f.batches = append(f.batches, uses)
	return nil
}

func (f *fakeStore) all() []map[string]time.Time {
	f.mu.Lock()
	defer f.mu.Unlock()
	return append([]map[string]time.Time(nil), f.batches...)
}

func TestRecorder(t *testing.T) {
	t.Parallel()
	log := slog.New(slog.DiscardHandler)
	t0 := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)

	t.Run("BatchesTheLatestUsePerKey", func(t *testing.T) {
		t.Parallel()
		store := &fakeStore{}
		r := postgres.NewRecorder(store, time.Hour, log)
		r.Record("key_a", t0)
		r.Record("key_a", t0.Add(time.Second))
		r.Record("key_a", t0) // older: ignored
		r.Record("key_b", t0)
		require.NoError(t, r.Flush(context.Background()))
		require.Equal(t, []map[string]time.Time{{"key_a": t0.Add(time.Second), "key_b": t0}}, store.all())
		require.NoError(t, r.Flush(context.Background()))
		require.Len(t, store.all(), 1, "nothing new, nothing written")
		require.NoError(t, r.Close(context.Background()))
	})

	t.Run("FlushesInTheBackground", func(t *testing.T) {
		t.Parallel()
		store := &fakeStore{}
		r := postgres.NewRecorder(store, 20*time.Millisecond, log)
		t.Cleanup(func() { _ = r.Close(context.Background()) })
		r.Record("key_a", t0)
		require.Eventually(t, func() bool { return len(store.all()) == 1 }, 2*time.Second, 10*time.Millisecond)
	})

	t.Run("CloseWritesWhatIsLeft", func(t *testing.T) {
		t.Parallel()
		store := &fakeStore{}
		r := postgres.NewRecorder(store, time.Hour, log)
		r.Record("key_a", t0)
		require.NoError(t, r.Close(context.Background()))
		require.Len(t, store.all(), 1)
	})

	t.Run("KeepsUsesAcrossFailures", func(t *testing.T) {
		t.Parallel()
		store := &fakeStore{fail: true}
		r := postgres.NewRecorder(store, time.Hour, log)
		r.Record("key_a", t0)
		require.Error(t, r.Flush(context.Background()))
		store.mu.Lock()
		store.fail = false
		store.mu.Unlock()
		require.NoError(t, r.Close(context.Background()))
		require.Equal(t, []map[string]time.Time{{"key_a": t0}}, store.all())
	})
}
