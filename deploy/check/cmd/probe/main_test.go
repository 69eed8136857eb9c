package main

import (
	"context"
	"net/http"
	"net/http/httptest"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
)

func TestProbe(t *testing.T) {
	t.Parallel()
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		switch r.URL.Path {
		case "/ready":
			_, _ = w.Write([]byte(`{"status":"ok"}`))
		case "/slow":
			time.Sleep(200 * time.Millisecond)
		default:
			w.WriteHeader(http.StatusServiceUnavailable)
			_, _ = w.Write([]byte(`{"status":"unavailable"}`))
		}
	}))
	t.Cleanup(srv.Close)

	ctx := context.Background()
	require.NoError(t, probe(ctx, srv.Client(), srv.URL+"/ready", time.Second))

	err := probe(ctx, srv.Client(), srv.URL+"/down", time.Second)
	require.ErrorIs(t, err, errStatus)
	require.ErrorContains(t, err, "503")

	require.ErrorIs(t, probe(ctx, srv.Client(), srv.URL+"/slow", 20*time.Millisecond), context.DeadlineExceeded)
	require.Error(t, probe(ctx, srv.Client(), "http://127.0.0.1:1/ready", time.Second))
}
