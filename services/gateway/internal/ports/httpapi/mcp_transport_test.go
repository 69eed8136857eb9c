package httpapi

import (
	"bufio"
	"io"
	"log/slog"
	"net/http"
	"testing"

	"github.com/stretchr/testify/require"
)

// The MCP tools' in-process requests read an answer while it is written: a run's event stream
// comes through event by event (runs_wait), not when it ends.
func TestSelfTransportStreams(t *testing.T) {
	t.Parallel()
	release := make(chan struct{})
	h := http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		switch r.URL.Path {
		case "/stream":
			w.Header().Set("Content-Type", "text/event-stream")
			w.WriteHeader(http.StatusOK)
			_, _ = io.WriteString(w, "event: one\ndata: {}\n\n")
			_ = http.NewResponseController(w).Flush()
			<-release
			_, _ = io.WriteString(w, "event: two\ndata: {}\n\n")
		case "/panic":
			panic("boom")
		case "/abort":
			w.WriteHeader(http.StatusOK)
			_, _ = io.WriteString(w, "partial")
			panic(http.ErrAbortHandler)
		default:
			w.Header().Set("X-Test", "1")
			_, _ = io.WriteString(w, `{"ok":true}`)
		}
	})
	c := &http.Client{Transport: selfTransport{h: h, log: slog.New(slog.DiscardHandler)}}

	resp, err := c.Get("http://gateway.internal/stream")
	require.NoError(t, err)
	defer resp.Body.Close()
	require.Equal(t, "text/event-stream", resp.Header.Get("Content-Type"))
	r := bufio.NewReader(resp.Body)
	line, err := r.ReadString('\n')
	require.NoError(t, err)
	require.Equal(t, "event: one\n", line, "the first event before the handler ends")
	close(release)
	rest, err := io.ReadAll(r)
	require.NoError(t, err)
	require.Equal(t, "data: {}\n\nevent: two\ndata: {}\n\n", string(rest))

	resp, err = c.Get("http://gateway.internal/plain")
	require.NoError(t, err)
	b, err := io.ReadAll(resp.Body)
	require.NoError(t, err)
	require.NoError(t, resp.Body.Close())
	require.Equal(t, http.StatusOK, resp.StatusCode)
	require.Equal(t, "1", resp.Header.Get("X-Test"))
	require.JSONEq(t, `{"ok":true}`, string(b))

	resp, err = c.Get("http://gateway.internal/panic")
	require.NoError(t, err)
	_, _ = io.ReadAll(resp.Body)
	require.NoError(t, resp.Body.Close())
	require.Equal(t, http.StatusInternalServerError, resp.StatusCode)

	// An answer the reverse proxy aborts (a stream closed by its client) is cut, not a crash.
	resp, err = c.Get("http://gateway.internal/abort")
	require.NoError(t, err)
	_, err = io.ReadAll(resp.Body)
	require.Error(t, err)
	require.NoError(t, resp.Body.Close())
}
