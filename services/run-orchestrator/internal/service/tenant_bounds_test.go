package service_test

import (
	"encoding/json"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync/atomic"
	"testing"

	"github.com/stretchr/testify/require"

	"svc.dev/services/run-orchestrator/internal/service"
)

// Issue 21, seen from a hostile tenant: valid workflows that try to make a shared process
// spend without bound. Templated params are held to the connector's schema before any side
// effect; outputs and error messages are bounded.

// attemptsOf returns the run's attempts of block, in order.
func attemptsOf(t *testing.T, b *testBundle, runID, block string) []map[string]any {
	t.Helper()
	var out []map[string]any
	for _, a := range b.logs(t, runID) {
		if a["block_id"] == block {
			out = append(out, a)
		}
	}
	return out
}

func TestTemplatedParamsMeetTheSchema(t *testing.T) {
	t.Parallel()
	sys := startWith(t, allowPrivate)
	var hits atomic.Int64
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) {
		hits.Add(1)
		w.WriteHeader(http.StatusOK)
	}))
	t.Cleanup(srv.Close)

	tests := []struct {
		name, params, pointer, rule string
	}{
		// Sent as TRACE before: the enum was only checked on literal values, at save time.
		{"MethodOutOfTheEnum", `{"method":"{{ 'TRACE' }}","url":"` + srv.URL + `"}`, "/method", "(enum)"},
		// A week of a shared worker before: the catalog's maximum is 300000.
		{"TimeoutOverTheMaximum", `{"method":"GET","url":"` + srv.URL + `","timeout_ms":"{{ 604800000 }}"}`, "/timeout_ms", "(maximum)"},
		{"MethodFromTheInput", `{"method":"{{ input.verb }}","url":"` + srv.URL + `"}`, "/method", "(enum)"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			b := sys.setup(t)
			b.workflow(t, "wf_p", 1, def([]string{manual,
				`{"block_id":"call","type":"http.request","params":` + tc.params + `}`,
				`{"block_id":"after","type":"log","params":{"message":"never"}}`,
			}, edge("start", "call"), edge("call", "after")))
			id := b.startRun(t, "wf_p", map[string]any{"input": map[string]any{"verb": "CONNECT"}})
			got := b.waitStatus(t, id, "failed")
			errBody := got["error"].(map[string]any)
			require.Equal(t, "call", errBody["block_id"])
			require.Contains(t, errBody["message"], "param "+tc.pointer)

			// One attempt: http.request's policy allows 3, but the resolved value cannot
			// change between retries.
			calls := attemptsOf(t, b, id, "call")
			require.Len(t, calls, 1)
			require.Equal(t, "failed", calls[0]["status"])
			e := calls[0]["error"].(map[string]any)
			require.Equal(t, "invalid_param", e["code"])
			msg := e["message"].(string)
			require.Contains(t, msg, "param "+tc.pointer+" of http.request")
			require.Contains(t, msg, tc.rule)
			if tc.rule == "(enum)" {
				require.Contains(t, msg, `allowed: ["GET","POST","PUT","PATCH","DELETE","HEAD","OPTIONS"]`)
			}
			require.Empty(t, attemptsOf(t, b, id, "after"))
		})
	}

	t.Run("ValidTemplatedParamsRun", func(t *testing.T) {
		t.Parallel()
		b := sys.setup(t)
		// allow_private_network is added by the server (SVC_HTTP_ALLOW_PRIVATE=1): the check
		// lets it through.
		b.workflow(t, "wf_ok", 1, def([]string{manual,
			`{"block_id":"call","type":"http.request","params":{"method":"{{ input.verb }}","url":"` + srv.URL + `","timeout_ms":"{{ 2000 }}"}}`,
			`{"block_id":"cond","type":"condition","params":{"expression":"steps.call.output.status == 200"}}`,
		}, edge("start", "call"), edge("call", "cond")))
		id := b.startRun(t, "wf_ok", map[string]any{"input": map[string]any{"verb": "POST"}})
		got := b.waitStatus(t, id, "completed")
		require.Equal(t, map[string]any{"cond": map[string]any{"result": true}}, got["output"])
	})

	// The refused calls never reached the server: the check comes before any side effect.
	// (Only ValidTemplatedParamsRun calls it, once.)
	t.Cleanup(func() { require.LessOrEqual(t, hits.Load(), int64(1)) })
}

func TestOutputsAreBounded(t *testing.T) {
	t.Parallel()
	// The run's bound at the attempt's: two sinks near it are over it together.
	sys := startWith(t, func(c *service.Config) {
		allowPrivate(c)
		c.RunOutputMax = 1 << 20
	})
	big := strings.Repeat("x", 600<<10) // an input under the 1 MiB request body limit

	t.Run("TransformOverTheBound", func(t *testing.T) {
		t.Parallel()
		b := sys.setup(t)
		// 4 × 600 KiB from the input: a 2.4 MiB output from a valid 600 KiB input.
		b.workflow(t, "wf_big", 1, def([]string{manual,
			`{"block_id":"grow","type":"transform","params":{"value":["{{ input.s }}","{{ input.s }}","{{ input.s }}","{{ input.s }}"]}}`,
			`{"block_id":"after","type":"log","params":{"message":"never"}}`,
		}, edge("start", "grow"), edge("grow", "after")))
		id := b.startRun(t, "wf_big", map[string]any{"input": map[string]any{"s": big}})
		got := b.waitStatus(t, id, "failed")
		require.Equal(t, "grow", got["error"].(map[string]any)["block_id"])
		grow := attemptsOf(t, b, id, "grow")
		require.Len(t, grow, 1)
		require.Nil(t, grow[0]["output"])
		e := grow[0]["error"].(map[string]any)
		require.Equal(t, "output_too_large", e["code"])
		// A transform's value is its output: its params are over the bound before it runs.
		require.Contains(t, e["message"], "the resolved params are 2457623 bytes")
		require.Contains(t, e["message"], "1048576 bytes")
	})

	t.Run("HTTPResponseOverTheBoundIsTruncatedToFit", func(t *testing.T) {
		t.Parallel()
		srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) {
			w.Header().Set("Content-Type", "application/json")
			_, _ = w.Write([]byte(`{"items":["` + strings.Repeat(`<tag>`, 600<<10) + `"]}`)) // 3 MiB
		}))
		t.Cleanup(srv.Close)
		b := sys.setup(t)
		b.workflow(t, "wf_http", 1, def([]string{manual,
			`{"block_id":"call","type":"http.request","params":{"method":"GET","url":"` + srv.URL + `"}}`,
		}, edge("start", "call")))
		id := b.startRun(t, "wf_http", nil)
		got := b.waitStatus(t, id, "completed")
		out := got["output"].(map[string]any)["call"].(map[string]any)
		require.Equal(t, true, out["truncated"])
		raw, err := json.Marshal(out)
		require.NoError(t, err)
		require.LessOrEqual(t, len(raw), 1<<20)
		require.Greater(t, len(raw), 900<<10)
	})

	t.Run("ResolvedParamsOverTheBoundRunNothing", func(t *testing.T) {
		t.Parallel()
		var hits atomic.Int64
		srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) { hits.Add(1) }))
		t.Cleanup(srv.Close)
		b := sys.setup(t)
		// Over the inline budget, the params are resolved by the worker under the full one,
		// which could produce megabytes: they would be the attempt's recorded input.
		b.workflow(t, "wf_params", 1, def([]string{manual,
			`{"block_id":"call","type":"http.request","params":{"method":"POST","url":"` + srv.URL + `","body":"{{ input.s + input.s }}"}}`,
		}, edge("start", "call")))
		id := b.startRun(t, "wf_params", map[string]any{"input": map[string]any{"s": big}})
		got := b.waitStatus(t, id, "failed")
		require.Equal(t, "call", got["error"].(map[string]any)["block_id"])
		for _, a := range attemptsOf(t, b, id, "call") {
			e := a["error"].(map[string]any)
			require.Equal(t, "output_too_large", e["code"])
			require.Contains(t, e["message"], "the resolved params are")
			require.Contains(t, e["message"], "1048576 bytes per attempt")
			raw, err := json.Marshal(a["input"])
			require.NoError(t, err)
			require.Less(t, len(raw), 1<<10, "the input recorded is the params as written")
		}
		require.Zero(t, hits.Load(), "the request was never sent")
	})

	t.Run("SinksOverTheRunBoundTogether", func(t *testing.T) {
		t.Parallel()
		b := sys.setup(t)
		b.workflow(t, "wf_sinks", 1, def([]string{manual,
			`{"block_id":"a","type":"transform","params":{"value":"{{ input.s }}"}}`,
			`{"block_id":"b","type":"transform","params":{"value":"{{ input.s }}"}}`,
		}, edge("start", "a"), edge("start", "b")))
		id := b.startRun(t, "wf_sinks", map[string]any{"input": map[string]any{"s": big}})
		got := b.waitStatus(t, id, "failed")
		e := got["error"].(map[string]any)
		require.Equal(t, "output_too_large", e["code"])
		require.Contains(t, e["message"], "over the bound of 1048576 bytes per run")
		require.Nil(t, got["output"])
		for _, blk := range []string{"a", "b"} {
			require.Equal(t, "succeeded", attemptsOf(t, b, id, blk)[0]["status"])
		}
	})

	t.Run("LongErrorMessagesAreCut", func(t *testing.T) {
		t.Parallel()
		b := sys.setup(t)
		b.workflow(t, "wf_err", 1, def([]string{manual,
			`{"block_id":"boom","type":"fail","params":{"message":"{{ input.s }}"}}`,
		}, edge("start", "boom")))
		id := b.startRun(t, "wf_err", map[string]any{"input": map[string]any{"s": big}})
		got := b.waitStatus(t, id, "failed")
		msg := got["error"].(map[string]any)["message"].(string)
		require.Less(t, len(msg), 5<<10)
		require.Contains(t, msg, "[error message cut at 4096 of its 614400 bytes]")
		for _, a := range attemptsOf(t, b, id, "boom") {
			require.Less(t, len(a["error"].(map[string]any)["message"].(string)), 5<<10)
		}
	})
}
