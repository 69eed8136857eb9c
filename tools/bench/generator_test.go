package main

import (
	"context"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"strconv"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
)

func TestPercentile(t *testing.T) {
	t.Parallel()

	ms := func(vs ...int) []time.Duration {
		out := make([]time.Duration, len(vs))
		for i, v := range vs {
			out[i] = time.Duration(v) * time.Millisecond
		}
		return out
	}
	oneToHundred := make([]int, 100)
	for i := range oneToHundred {
		oneToHundred[i] = i + 1
	}

	tests := []struct {
		name   string
		sorted []time.Duration
		q      float64
		want   time.Duration
	}{
		{"Empty", nil, 0.5, 0},
		{"OneValueIsEveryPercentile", ms(7), 0.99, 7 * time.Millisecond},
		{"HundredP50", ms(oneToHundred...), 0.50, 50 * time.Millisecond},
		{"HundredP90", ms(oneToHundred...), 0.90, 90 * time.Millisecond},
		{"HundredP99", ms(oneToHundred...), 0.99, 99 * time.Millisecond},
		{"HundredMax", ms(oneToHundred...), 1, 100 * time.Millisecond},
		{"TenP90IsNinthDespiteFloatingPoint", ms(1, 2, 3, 4, 5, 6, 7, 8, 9, 10), 0.90, 9 * time.Millisecond},
		{"TenP99RoundsUpToTheLast", ms(1, 2, 3, 4, 5, 6, 7, 8, 9, 10), 0.99, 10 * time.Millisecond},
		{"FourP50IsTheSecond", ms(10, 20, 30, 40), 0.50, 20 * time.Millisecond},
		{"TinyQIsTheFirst", ms(10, 20, 30, 40), 0.001, 10 * time.Millisecond},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			require.Equal(t, tt.want, percentile(tt.sorted, tt.q))
		})
	}
}

func TestSummarize(t *testing.T) {
	t.Parallel()

	from := time.Now()
	at := func(d time.Duration) time.Time { return from.Add(d) }
	samples := []sample{
		{latency: 1 * time.Millisecond, done: at(100 * time.Millisecond), outcome: outcomeOK},
		{latency: 2 * time.Millisecond, done: at(200 * time.Millisecond), outcome: outcomeOK},
		{latency: 3 * time.Millisecond, done: at(300 * time.Millisecond), outcome: outcomeStatus},
		{latency: 9 * time.Second, done: at(400 * time.Millisecond), outcome: outcomeTransport},
		// Answered 1s after a 1s window opened: the window stretches to 2s.
		{latency: 1500 * time.Millisecond, done: at(2 * time.Second), outcome: outcomeOK},
	}
	st := summarize(samples, from, time.Second, 5)

	require.Equal(t, 5, st.N)
	require.Equal(t, 1, st.StatusErrors)
	require.Equal(t, 1, st.TransportErrors)
	require.InDelta(t, 1.5, st.AchievedRate, 0.001, "3 expected answers over a 2s window")
	require.Equal(t, 2*time.Millisecond, st.P50, "transport errors have no latency")
	require.Equal(t, 1500*time.Millisecond, st.Max)
}

func TestGenerator(t *testing.T) {
	t.Parallel()

	type testBundle struct {
		gen  *Generator
		hits *atomic.Int64
		url  string
	}

	// setup starts a server that answers status after delay.
	setup := func(t *testing.T, maxInFlight int, delay time.Duration, status int) *testBundle {
		t.Helper()
		hits := &atomic.Int64{}
		srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) {
			hits.Add(1)
			time.Sleep(delay)
			w.WriteHeader(status)
			_, _ = w.Write([]byte(`{"code":"not_found"}`))
		}))
		t.Cleanup(srv.Close)
		client := newHTTPClient(maxInFlight)
		t.Cleanup(client.CloseIdleConnections)
		return &testBundle{gen: NewGenerator(client, maxInFlight), hits: hits, url: srv.URL}
	}

	t.Run("FixedDelayIsTheMedian", func(t *testing.T) {
		t.Parallel()
		const delay = 20 * time.Millisecond
		bundle := setup(t, 64, delay, http.StatusNotFound)

		st, err := bundle.gen.Run(t.Context(), Phase{
			Target: Target{URL: bundle.url, Expect: http.StatusNotFound},
			Rate:   100, Warmup: 200 * time.Millisecond, Duration: 800 * time.Millisecond,
		})
		require.NoError(t, err)
		require.Equal(t, 80, st.N)
		require.Zero(t, st.TransportErrors)
		require.Zero(t, st.StatusErrors)
		require.GreaterOrEqual(t, st.P50, delay)
		require.Less(t, st.P50, delay+10*time.Millisecond)
		require.LessOrEqual(t, st.P50, st.P90)
		require.LessOrEqual(t, st.P90, st.P99)
		require.LessOrEqual(t, st.P99, st.Max)
	})

	t.Run("AchievesTheRateWithinTenPercent", func(t *testing.T) {
		t.Parallel()
		bundle := setup(t, 64, 0, http.StatusOK)

		st, err := bundle.gen.Run(t.Context(), Phase{
			Target: Target{URL: bundle.url, Expect: http.StatusOK},
			Rate:   200, Warmup: 200 * time.Millisecond, Duration: 800 * time.Millisecond,
		})
		require.NoError(t, err)
		require.Equal(t, 160, st.N, "measured requests are the measured slots")
		require.Equal(t, int64(200), bundle.hits.Load(), "warm-up requests are sent but not counted")
		require.InEpsilon(t, 200, st.AchievedRate, 0.10)
	})

	t.Run("StallsShowInTheLatency", func(t *testing.T) {
		t.Parallel()
		// One request at a time, each taking 50ms, scheduled every 25ms: the system serves half
		// the rate and the queue grows. A closed loop would report 50ms for each request; the
		// open loop counts from each slot, so the later requests show the wait.
		const delay = 50 * time.Millisecond
		bundle := setup(t, 1, delay, http.StatusOK)

		st, err := bundle.gen.Run(t.Context(), Phase{
			Target: Target{URL: bundle.url, Expect: http.StatusOK},
			Rate:   40, Duration: 500 * time.Millisecond,
		})
		require.NoError(t, err)
		require.Equal(t, 20, st.N)
		require.Greater(t, st.P99, 8*delay, "the last request waited for the 19 before it")
		require.Less(t, st.AchievedRate, 30.0, "a system that falls behind does not achieve the rate")
	})

	t.Run("StatusErrorsAreCountedApart", func(t *testing.T) {
		t.Parallel()
		bundle := setup(t, 16, 0, http.StatusInternalServerError)

		st, err := bundle.gen.Run(t.Context(), Phase{
			Target: Target{URL: bundle.url, Expect: http.StatusOK},
			Rate:   100, Duration: 200 * time.Millisecond,
		})
		require.NoError(t, err)
		require.Equal(t, 20, st.StatusErrors)
		require.Zero(t, st.TransportErrors)
		require.Zero(t, st.AchievedRate)
		require.Positive(t, st.P50, "a wrong answer still has a latency")
	})

	t.Run("TransportErrorsAreCountedApart", func(t *testing.T) {
		t.Parallel()
		ln, err := net.Listen("tcp", "127.0.0.1:0")
		require.NoError(t, err)
		closed := "http://" + ln.Addr().String()
		require.NoError(t, ln.Close())
		gen := NewGenerator(newHTTPClient(16), 16)

		st, err := gen.Run(t.Context(), Phase{
			Target: Target{URL: closed, Expect: http.StatusOK},
			Rate:   100, Duration: 200 * time.Millisecond,
		})
		require.NoError(t, err)
		require.Equal(t, 20, st.TransportErrors)
		require.Zero(t, st.StatusErrors)
		require.Zero(t, st.P50)
	})

	t.Run("SendsMethodAndHeaders", func(t *testing.T) {
		t.Parallel()
		var got atomic.Value
		srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			got.Store(r.Method + " " + r.Header.Get("Authorization"))
			w.WriteHeader(http.StatusUnauthorized)
		}))
		t.Cleanup(srv.Close)
		gen := NewGenerator(newHTTPClient(4), 4)

		st, err := gen.Run(t.Context(), Phase{
			Target: Target{
				Method: http.MethodPost, URL: srv.URL, Expect: http.StatusUnauthorized,
				Header: http.Header{"Authorization": {"Bearer x"}},
			},
			Rate: 50, Duration: 100 * time.Millisecond,
		})
		require.NoError(t, err)
		require.Zero(t, st.StatusErrors)
		require.Equal(t, "POST Bearer x", got.Load())
	})

	t.Run("PreparesEachRequestAndSendsTheBody", func(t *testing.T) {
		t.Parallel()
		var mu sync.Mutex
		got := map[string]string{}
		srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			b, _ := io.ReadAll(r.Body)
			mu.Lock()
			got[r.URL.Path] = r.Header.Get("X-Slot") + " " + string(b)
			mu.Unlock()
			_, _ = w.Write([]byte(`{"ok":true}`))
		}))
		t.Cleanup(srv.Close)
		gen := NewGenerator(newHTTPClient(4), 4)

		phase := Phase{
			Target: Target{
				Method: http.MethodPost, URL: srv.URL + "/base", Body: []byte(`{"ops":[]}`), Expect: http.StatusOK,
				Prepare: func(i int, req *http.Request) {
					req.URL.Path = fmt.Sprintf("/w%d", i)
					req.Header.Set("X-Slot", strconv.Itoa(i))
				},
				Check: func(b []byte) error { return nil },
			},
			Rate: 100, Warmup: 50 * time.Millisecond, Duration: 100 * time.Millisecond,
		}
		require.Equal(t, 15, phase.Requests(), "warm-up included")
		st, err := gen.Run(t.Context(), phase)
		require.NoError(t, err)
		require.Zero(t, st.StatusErrors)
		require.Empty(t, st.FirstError)
		require.Len(t, got, 15, "one path per slot")
		require.Equal(t, `14 {"ops":[]}`, got["/w14"])
	})

	t.Run("ACheckThatFailsIsAStatusError", func(t *testing.T) {
		t.Parallel()
		bundle := setup(t, 4, 0, http.StatusOK)
		st, err := bundle.gen.Run(t.Context(), Phase{
			Target: Target{URL: bundle.url, Expect: http.StatusOK, Check: func(b []byte) error {
				return fmt.Errorf("not ok: %s", b)
			}},
			Rate: 100, Duration: 100 * time.Millisecond,
		})
		require.NoError(t, err)
		require.Equal(t, 10, st.StatusErrors)
		require.Zero(t, st.AchievedRate)
		require.Contains(t, st.FirstError, `200 but not ok: {"code":"not_found"}`)
	})

	t.Run("AWrongStatusSaysWhatCame", func(t *testing.T) {
		t.Parallel()
		bundle := setup(t, 4, 0, http.StatusNotFound)
		st, err := bundle.gen.Run(t.Context(), Phase{
			Target: Target{URL: bundle.url + "/p", Expect: http.StatusOK},
			Rate:   100, Duration: 100 * time.Millisecond,
		})
		require.NoError(t, err)
		require.Equal(t, `GET /p: status 404: {"code":"not_found"}`, st.FirstError)
	})

	t.Run("StopsWhenTheContextEnds", func(t *testing.T) {
		t.Parallel()
		bundle := setup(t, 64, 0, http.StatusOK)
		ctx, cancel := context.WithTimeout(t.Context(), 100*time.Millisecond)
		defer cancel()

		began := time.Now()
		_, err := bundle.gen.Run(ctx, Phase{
			Target: Target{URL: bundle.url, Expect: http.StatusOK},
			Rate:   100, Duration: time.Minute,
		})
		require.ErrorIs(t, err, context.DeadlineExceeded)
		require.Less(t, time.Since(began), 2*time.Second)
	})

	t.Run("RejectsAnEmptyPhase", func(t *testing.T) {
		t.Parallel()
		bundle := setup(t, 1, 0, http.StatusOK)
		_, err := bundle.gen.Run(t.Context(), Phase{Target: Target{URL: bundle.url}, Rate: 0, Duration: time.Second})
		require.Error(t, err)
	})
}
