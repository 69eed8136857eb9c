package web_test

import (
	"context"
	"io"
	"log/slog"
	"net/http"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"svc.dev/libs/web"
)

// A stop lets a request already in flight finish, then refuses new connections.
func TestServerDrainsOnStop(t *testing.T) {
	t.Parallel()
	started := make(chan struct{})
	var once sync.Once
	release := make(chan struct{})
	h := http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) {
		once.Do(func() { close(started) })
		<-release
		_, _ = io.WriteString(w, "finished")
	})
	srv, err := web.Listen("127.0.0.1:0", h, slog.New(slog.DiscardHandler), 10*time.Second)
	require.NoError(t, err)
	ctx, stop := context.WithCancel(context.Background())
	served := make(chan error, 1)
	go func() { served <- srv.Serve(ctx) }()

	type answer struct {
		body string
		err  error
	}
	got := make(chan answer, 1)
	go func() {
		resp, err := http.Get("http://" + srv.Addr() + "/")
		if err != nil {
			got <- answer{err: err}
			return
		}
		defer resp.Body.Close()
		b, err := io.ReadAll(resp.Body)
		got <- answer{body: string(b), err: err}
	}()
	<-started
	stop() // SIGTERM arrives while the request is in flight
	probe := &http.Client{Timeout: 100 * time.Millisecond}
	require.Eventually(t, func() bool {
		resp, err := probe.Get("http://" + srv.Addr() + "/")
		if err == nil {
			resp.Body.Close()
		}
		return err != nil
	}, 5*time.Second, 10*time.Millisecond, "new connections are refused once stopping")
	close(release)

	a := <-got
	require.NoError(t, a.err)
	require.Equal(t, "finished", a.body)
	require.NoError(t, <-served)
}

// Headers past MaxHeaderBytes are answered with the contract's JSON (413 payload_too_large),
// not net/http's plain-text 431, up to what the server reads at all.
func TestServerRefusesLargeHeadersInJSON(t *testing.T) {
	t.Parallel()
	h := web.Chain(http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) { _, _ = io.WriteString(w, "ok") }),
		web.HeaderLimit(web.MaxHeaderBytes))
	srv, err := web.Listen("127.0.0.1:0", h, slog.New(slog.DiscardHandler), time.Second)
	require.NoError(t, err)
	ctx, stop := context.WithCancel(context.Background())
	t.Cleanup(stop)
	go func() { _ = srv.Serve(ctx) }()

	send := func(pad int) (*http.Response, string) {
		req, err := http.NewRequest(http.MethodGet, "http://"+srv.Addr()+"/", nil)
		require.NoError(t, err)
		req.Header.Set("X-Pad", strings.Repeat("p", pad))
		resp, err := http.DefaultClient.Do(req)
		require.NoError(t, err)
		defer resp.Body.Close()
		b, err := io.ReadAll(resp.Body)
		require.NoError(t, err)
		return resp, string(b)
	}
	resp, body := send(60 << 10)
	require.Equal(t, http.StatusOK, resp.StatusCode, body)
	resp, body = send(70 << 10)
	require.Equal(t, http.StatusRequestEntityTooLarge, resp.StatusCode, body)
	require.Equal(t, "application/json", resp.Header.Get("Content-Type"))
	require.Contains(t, body, `"error":"payload_too_large"`)
	require.Contains(t, body, "headers")
	resp, body = send(900 << 10)
	require.Equal(t, http.StatusRequestEntityTooLarge, resp.StatusCode, body)
}
