package web_test

import (
	"context"
	"io"
	"log/slog"
	"net/http"
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
