package apiclient_test

import (
	"errors"
	"io"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"

	api "svc.dev/clients/apiclient"
)

func TestEventReader(t *testing.T) {
	t.Parallel()
	stream := ": heartbeat\n\n" +
		"id: 1.1\r\nevent: run.status\r\ndata: {\"status\":\"queued\"}\r\n\r\n" +
		"event: note\ndata:first\ndata: second\n\n" + // no id: the last one carries over
		"id: 2.2\nevent: empty\n\n" + // no data: not dispatched, but the id is kept
		"data: {}\nretry: 100\nunknown: x\n\n" +
		"id: 3.2\nevent: cut\ndata: {}\n" // no blank line: dropped at EOF
	r := api.NewEventReader(strings.NewReader(stream))
	var got []api.Event
	for {
		ev, err := r.Next()
		if errors.Is(err, io.EOF) {
			break
		}
		require.NoError(t, err)
		got = append(got, ev)
	}
	require.Equal(t, []api.Event{
		{ID: "1.1", Kind: "run.status", Data: []byte(`{"status":"queued"}`)},
		{ID: "1.1", Kind: "note", Data: []byte("first\nsecond")},
		{ID: "2.2", Kind: "message", Data: []byte("{}")},
	}, got)
}
