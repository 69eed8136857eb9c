package e2e

import (
	"net/http"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
)

// TestRevokedKeyFailsOnItsNextRequestUnderLoad (issue 16): the guard reuses identities
// (SVC_GUARD_CACHE_TTL, on by default), yet a key revoked while 8 clients keep using it (its
// identity hot in the cache) is refused by every request sent after the revocation returned,
// on the very next one.
func TestRevokedKeyFailsOnItsNextRequestUnderLoad(t *testing.T) {
	t.Parallel()
	sys := startIdentitySystem(t, map[string]string{"SVC_RATE_LIMIT_PER_MINUTE": "1000000", "SVC_GUARD_CACHE_TTL": "1m"})
	a := signUp(t, sys, "revoke-hot")
	k := a.c.post("/api/auth/api-key/create", map[string]any{"name": "hot"})
	require.Equal(t, http.StatusOK, k.Status, k.Raw)
	key, keyID := k.Body["key"].(string), k.Body["id"].(string)
	get := func() (int, error) {
		req, err := http.NewRequestWithContext(t.Context(), http.MethodGet, sys.BaseURL+"/api/workflows", nil)
		if err != nil {
			return 0, err
		}
		req.Header.Set("X-Api-Key", key)
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			return 0, err
		}
		_ = resp.Body.Close()
		return resp.StatusCode, nil
	}
	status, err := get()
	require.NoError(t, err)
	require.Equal(t, http.StatusOK, status)

	var (
		revokedAt  atomic.Int64 // unix ns when the revocation returned; 0 before
		stop       atomic.Bool
		mu         sync.Mutex
		lateOK     []time.Time // requests sent after the revocation returned that passed
		sent, errs atomic.Int64
		wg         sync.WaitGroup
	)
	for range 8 {
		wg.Go(func() {
			for !stop.Load() {
				before := revokedAt.Load()
				status, err := get()
				sent.Add(1)
				if err != nil {
					errs.Add(1)
					continue
				}
				if before != 0 && status != http.StatusUnauthorized {
					mu.Lock()
					lateOK = append(lateOK, time.Unix(0, before))
					mu.Unlock()
				}
			}
		})
	}
	require.Eventually(t, func() bool { return sent.Load() > 200 }, 15*time.Second, time.Millisecond, "the key's identity is in use")
	r := a.c.do(http.MethodDelete, "/api/auth/api-key/"+keyID, nil)
	require.Equal(t, http.StatusOK, r.Status, r.Raw)
	revokedAt.Store(time.Now().UnixNano())
	status, err = get()
	require.NoError(t, err)
	require.Equal(t, http.StatusUnauthorized, status, "the very next request after the revocation is refused")
	after := sent.Load()
	require.Eventually(t, func() bool { return sent.Load() > after+200 }, 15*time.Second, time.Millisecond)
	stop.Store(true)
	wg.Wait()
	require.Zero(t, errs.Load())
	require.Empty(t, lateOK, "requests sent after the revocation returned passed the guard")
	t.Logf("%d requests with the key, 8 at a time, across its revocation", sent.Load())
}
