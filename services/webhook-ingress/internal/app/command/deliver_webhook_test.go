package command_test

import (
	"context"
	"errors"
	"io"
	"log/slog"
	"net"
	"net/http"
	"sync"
	"testing"

	"github.com/stretchr/testify/require"

	"svc.dev/libs/redisx"
	"svc.dev/libs/testkit"
	redisadapter "svc.dev/services/webhook-ingress/internal/adapters/redis"
	"svc.dev/services/webhook-ingress/internal/app/command"
	"svc.dev/services/webhook-ingress/internal/app/port"
	"svc.dev/services/webhook-ingress/internal/domain/route"
)

// recordingDispatcher stands in for run-orchestrator, which does not run in unit tests (the
// e2e tests drive the real one): it starts "runs" per key like the orchestrator's record does
// and counts the calls.
type recordingDispatcher struct {
	mu    sync.Mutex
	calls []port.StartRun
	runs  map[string]string
	err   error
}

func (d *recordingDispatcher) StartRun(_ context.Context, cmd port.StartRun) (port.Started, error) {
	d.mu.Lock()
	defer d.mu.Unlock()
	d.calls = append(d.calls, cmd)
	if d.err != nil {
		return port.Started{}, d.err
	}
	if id, ok := d.runs[cmd.IdempotencyKey]; ok {
		return port.Started{RunID: id, Deduplicated: true}, nil
	}
	id := "run_" + cmd.IdempotencyKey
	d.runs[cmd.IdempotencyKey] = id
	return port.Started{RunID: id}, nil
}

type orgs map[string]string

func (o orgs) Resolve(_ context.Context, ref string) (string, error) {
	if id, ok := o[ref]; ok {
		return id, nil
	}
	return "", port.ErrOrganizationNotFound
}

func TestDeliverWebhook(t *testing.T) {
	t.Parallel()

	type testBundle struct {
		handler command.DeliverWebhookHandler
		runs    *recordingDispatcher
		entry   func(r route.Route) *route.Entry
	}
	setup := func(t *testing.T, store port.KeyStore) *testBundle {
		t.Helper()
		if store == nil {
			c, keys := testkit.NewRedis(t)
			store = redisadapter.NewIdempotencyStore(c, keys)
		}
		runs := &recordingDispatcher{runs: map[string]string{}}
		log := slog.New(slog.NewTextHandler(io.Discard, nil))
		return &testBundle{
			handler: command.NewDeliverWebhookHandler(runs, store, orgs{"acme": "org_acme"}, log),
			runs:    runs,
			entry: func(r route.Route) *route.Entry {
				g := route.NewRegistry()
				require.NoError(t, g.Register(r))
				return g.Entries()[0]
			},
		}
	}
	valid := func() route.Route {
		return route.Route{
			Path: "/x/:p", Method: http.MethodPost, Organization: "acme", WorkflowName: "wf",
			InputSchema: []byte(`{"type":"object","required":["n"],"properties":{"n":{"type":"integer"}}}`),
			FromRequest: func(_ context.Context, req route.Request) (any, error) { return req.Body, nil },
			IdempotencyKey: func(req route.Request) (string, error) {
				return req.Headers.Get("Key"), nil
			},
		}
	}
	deliver := func(b *testBundle, r route.Route, body any, key string) (command.Accepted, error) {
		return b.handler.Handle(context.Background(), command.DeliverWebhook{Entry: b.entry(r), Path: "/api/webhooks/x/1",
			Request: route.Request{Body: body, Headers: http.Header{"Key": {key}}, Params: map[string]string{"p": "1"}}})
	}

	t.Run("StartsOnceAndAnswersRedeliveriesFromTheStore", func(t *testing.T) {
		t.Parallel()
		b := setup(t, nil)
		a, err := deliver(b, valid(), map[string]any{"n": 1}, "k1")
		require.NoError(t, err)
		require.Equal(t, "run_webhook:POST /x/:p:k1", a.RunID)
		again, err := deliver(b, valid(), map[string]any{"n": 1}, "k1")
		require.NoError(t, err)
		require.Equal(t, a.RunID, again.RunID)
		require.True(t, again.Deduplicated)
		require.Len(t, b.runs.calls, 1, "the redelivery was answered from Redis")
		call := b.runs.calls[0]
		require.Equal(t, "org_acme", call.OrganizationID)
		require.Equal(t, "wf", call.WorkflowName)
		require.JSONEq(t, `{"n":1}`, string(call.Input))
		require.JSONEq(t, `{"route":"POST /x/:p","path":"/api/webhooks/x/1","idempotencyKey":"k1"}`, string(call.Trigger))
	})

	t.Run("WithoutRedisTheOrchestratorStillDedupes", func(t *testing.T) {
		t.Parallel()
		ln, err := net.Listen("tcp", "127.0.0.1:0")
		require.NoError(t, err)
		dead := "redis://" + ln.Addr().String() + "/0"
		require.NoError(t, ln.Close())
		c, err := redisx.Open(dead, nil, nil)
		require.NoError(t, err)
		t.Cleanup(func() { _ = c.Close() })
		b := setup(t, redisadapter.NewIdempotencyStore(c, redisx.NewKeys("t:")))
		first, err := deliver(b, valid(), map[string]any{"n": 1}, "k")
		require.NoError(t, err)
		second, err := deliver(b, valid(), map[string]any{"n": 1}, "k")
		require.NoError(t, err)
		require.Equal(t, first.RunID, second.RunID)
		require.Len(t, b.runs.calls, 2, "both went to the orchestrator, whose record answered the first run")
	})

	// Issue 21: GitHub signs the body alone, so a captured delivery replayed under a new
	// X-GitHub-Delivery started a new run. The body's SHA-256 is a second key.
	bodySigned := func() route.Route {
		r := valid()
		r.SignedBodyOnly = true
		return r
	}
	deliverRaw := func(b *testBundle, r route.Route, raw, key string) (command.Accepted, error) {
		return b.handler.Handle(context.Background(), command.DeliverWebhook{Entry: b.entry(r), Path: "/api/webhooks/x/1",
			Request: route.Request{Body: map[string]any{"n": 1}, RawBody: []byte(raw), Headers: http.Header{"Key": {key}}, Params: map[string]string{"p": "1"}}})
	}

	t.Run("AReplayedSignedBodyUnderANewKeyStartsNothing", func(t *testing.T) {
		t.Parallel()
		b := setup(t, nil)
		first, err := deliverRaw(b, bodySigned(), `{"n":1}`, "delivery-1")
		require.NoError(t, err)
		require.False(t, first.Deduplicated)
		for _, key := range []string{"delivery-2", "delivery-3", "delivery-1"} {
			again, err := deliverRaw(b, bodySigned(), `{"n":1}`, key)
			require.NoError(t, err)
			require.Equal(t, first.RunID, again.RunID, key)
			require.True(t, again.Deduplicated, key)
		}
		require.Len(t, b.runs.calls, 1, "the replays were answered from Redis")
		// The trigger still names the delivery's own key, X-GitHub-Delivery (docs/API.md,
		// "Webhooks").
		require.JSONEq(t, `{"route":"POST /x/:p","path":"/api/webhooks/x/1","idempotencyKey":"delivery-1"}`, string(b.runs.calls[0].Trigger))

		other, err := deliverRaw(b, bodySigned(), `{"n":1} `, "delivery-4")
		require.NoError(t, err)
		require.NotEqual(t, first.RunID, other.RunID, "another body is another delivery")
	})

	t.Run("AReplayedSignedBodyMissedByRedisIsDedupedByTheOrchestrator", func(t *testing.T) {
		t.Parallel()
		b := setup(t, nil)
		// Concurrent replays under distinct keys all miss Redis; the orchestrator's record,
		// made under the body's key, answers every one with the first run.
		const n = 8
		got := make([]command.Accepted, n)
		errs := make([]error, n)
		var wg sync.WaitGroup
		for i := range n {
			wg.Go(func() { got[i], errs[i] = deliverRaw(b, bodySigned(), `{"n":2}`, "d-"+string(rune('a'+i))) })
		}
		wg.Wait()
		for i := range n {
			require.NoError(t, errs[i])
			require.Equal(t, got[0].RunID, got[i].RunID)
		}
		require.Len(t, b.runs.runs, 1)
	})

	t.Run("RefusalsStartNothing", func(t *testing.T) {
		t.Parallel()
		b := setup(t, nil)
		panics := valid()
		panics.FromRequest = func(context.Context, route.Request) (any, error) { panic("boom") }
		plainErr := valid()
		plainErr.FromRequest = func(context.Context, route.Request) (any, error) { return nil, errors.New("unsupported event") }
		badSig := valid()
		badSig.FromRequest = func(context.Context, route.Request) (any, error) { return nil, &route.SignatureError{Reason: "wrong"} }
		noKey := valid()
		keyPanics := valid()
		keyPanics.IdempotencyKey = func(route.Request) (string, error) { panic("boom") }
		unknownOrg := valid()
		unknownOrg.Organization = "nobody"

		var (
			rej *route.RejectedError
			sig *route.SignatureError
			inv *command.InvalidInputError
		)
		_, err := deliver(b, panics, map[string]any{"n": 1}, "k")
		require.ErrorAs(t, err, &rej)
		_, err = deliver(b, plainErr, map[string]any{"n": 1}, "k")
		require.ErrorAs(t, err, &rej)
		require.Equal(t, "unsupported event", rej.Reason)
		_, err = deliver(b, badSig, map[string]any{"n": 1}, "k")
		require.ErrorAs(t, err, &sig)
		_, err = deliver(b, noKey, map[string]any{"n": 1}, "")
		require.ErrorAs(t, err, &rej)
		_, err = deliver(b, keyPanics, map[string]any{"n": 1}, "k")
		require.ErrorAs(t, err, &rej)
		_, err = deliver(b, valid(), map[string]any{"n": "one"}, "k")
		require.ErrorAs(t, err, &inv)
		require.Equal(t, "/n", inv.Issues[0].Path)
		_, err = deliver(b, unknownOrg, map[string]any{"n": 1}, "k")
		require.ErrorIs(t, err, port.ErrWorkflowNotFound)
		require.Empty(t, b.runs.calls)
	})

	t.Run("OrchestratorDownIsUnavailableAndRemembersNothing", func(t *testing.T) {
		t.Parallel()
		b := setup(t, nil)
		b.runs.err = &port.UnavailableError{Peer: "run-orchestrator", Err: errors.New("connection refused")}
		_, err := deliver(b, valid(), map[string]any{"n": 1}, "k")
		var down *port.UnavailableError
		require.ErrorAs(t, err, &down)
		b.runs.err = nil
		a, err := deliver(b, valid(), map[string]any{"n": 1}, "k")
		require.NoError(t, err)
		require.False(t, a.Deduplicated)
	})
}
