package main

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"time"

	"svc.dev/clients/apiclient"
)

// patch100Ops measures a 100-op batch through the gateway (target: p99 ≤ 20 ms). The batch is
// the one the editor's in-process BenchmarkPatch100Ops sends: 50 `add`s of http.request blocks
// with params (one a template), 49 `connect`s chaining them, one `update`.
//
// Every request must do the same work, and the batch only means the same thing on the same
// starting point, so each request gets an empty workflow of its own: before the phase, bench
// creates one per request it will send (warm-up included) and request i patches workflow i.
// The body is then the same bytes every time, no definition grows past 50 blocks, and the check
// of each answer (ok, no skipped op, version 2) proves that no workflow was patched twice. The
// workflows are deleted afterwards. Creating them is setup, not measured.
//
// Its default rate is 50/s: a batch costs the editor a few milliseconds of CPU and Postgres a
// 50-block jsonb write, and 500 of them a second is beyond two cores.
type patch100Ops struct{}

func (patch100Ops) Name() string         { return "patch-100-ops" }
func (patch100Ops) DefaultRate() float64 { return 50 }

const (
	patch100Target   = 20 * time.Millisecond
	patch1000Target  = 100 * time.Millisecond
	setupWorkers     = 4
	maxOpsPerRequest = 500 // the editor's bound on ops per request (400 invalid_body above it)
)

// batch100 is the 100 operations of BenchmarkPatch100Ops, for an empty workflow.
func batch100() []map[string]any {
	ops := make([]map[string]any, 0, 100)
	for k := range 50 {
		ops = append(ops, map[string]any{
			"operation_type": "add", "block_id": fmt.Sprintf("b%d", k), "type": "http.request",
			"params": map[string]any{"method": "POST", "url": "https://example.com/{{ input.k }}", "body": map[string]any{"n": k}},
		})
	}
	for k := 1; k < 50; k++ {
		ops = append(ops, map[string]any{"operation_type": "connect", "block_id": fmt.Sprintf("b%d", k-1), "target_block_id": fmt.Sprintf("b%d", k)})
	}
	return append(ops, map[string]any{"operation_type": "update", "block_id": "b0", "params": map[string]any{"timeout_ms": 1000}})
}

func (p patch100Ops) Run(ctx context.Context, env Env) ([]Result, error) {
	acct, keyed, err := signUpKeyed(ctx, env, p.Name())
	if err != nil {
		return nil, fmt.Errorf("setup: %w", err)
	}
	body, err := json.Marshal(map[string]any{"ops": batch100()})
	if err != nil {
		return nil, err
	}
	t := Target{
		Method: http.MethodPost,
		URL:    env.GatewayURL + "/api/workflows/pending/operations", // replaced per request
		Header: http.Header{"X-Api-Key": {acct.key}, "Content-Type": {"application/json"}},
		Body:   body,
		Expect: http.StatusOK,
		Check:  patchApplied(100, 2, false),
	}
	phase := env.phase(t)

	n := phase.Requests()
	env.Log("  creating %d empty workflows, one per request ...", n)
	ids := make([]string, n)
	defer deleteWorkflows(context.WithoutCancel(ctx), env, keyed, ids)
	began := time.Now()
	err = forEach(ctx, n, setupWorkers, func(ctx context.Context, i int) error {
		wf, err := createWorkflow(ctx, keyed, apiclient.CreateWorkflowRequest{Name: fmt.Sprintf("bench-100-ops-%05d", i)})
		if err != nil {
			return err
		}
		ids[i] = wf.ID
		return nil
	})
	if err != nil {
		return nil, fmt.Errorf("setup: %w", err)
	}
	env.Log("  created in %s", time.Since(began).Round(10*time.Millisecond))
	urls := make([]*url.URL, n)
	for i, id := range ids {
		if urls[i], err = url.Parse(env.GatewayURL + "/api/workflows/" + id + "/operations"); err != nil {
			return nil, err
		}
	}
	phase.Target.Prepare = func(i int, req *http.Request) { req.URL = urls[i] }

	env.Log("  POST /api/workflows/:id/operations (100 ops, a fresh workflow each) at %g/s", env.Rate)
	st, err := env.Generator.Run(ctx, phase)
	if err != nil {
		return nil, err
	}
	return []Result{{
		Scenario: p.Name(), Phase: "100-op batch via gateway, fresh workflow each", Stats: st,
		Note: patchFinding(st, "100-op batch", patch100Target),
	}}, nil
}

// patch1000Blocks measures a patch of a 1,000-block workflow through the gateway (target: p99
// ≤ 100 ms). The workflow is the one of the editor's BenchmarkPatch1000BlockWorkflow: a manual
// trigger and 999 log blocks in a chain, each logging its predecessor's output through a
// template, so validation walks the whole graph and parses a template per block. It is built
// before the phase in batches of at most 500 ops. Request i then updates one block's message
// (block 1 + i mod 999, to a text that names i): one op, always applied, the definition's size
// steady. The requests are not ordered with If-Match; the editor serialises them on the row.
//
// Its default rate is 20/s: every patch reads, validates and writes the whole 1,000-block
// definition.
type patch1000Blocks struct{}

func (patch1000Blocks) Name() string         { return "patch-1000-blocks" }
func (patch1000Blocks) DefaultRate() float64 { return 20 }

// blocks1000 is the operations that build the 1,000-block chain in an empty workflow.
func blocks1000() []map[string]any {
	ops := []map[string]any{{"operation_type": "add", "block_id": "b0", "type": "trigger.manual"}}
	for k := 1; k < 1000; k++ {
		ops = append(ops, map[string]any{
			"operation_type": "add", "block_id": fmt.Sprintf("b%d", k), "type": "log",
			"params": map[string]any{"message": fmt.Sprintf("{{ steps.b%d.output }}", k-1)},
		})
	}
	for k := 1; k < 1000; k++ {
		ops = append(ops, map[string]any{"operation_type": "connect", "block_id": fmt.Sprintf("b%d", k-1), "target_block_id": fmt.Sprintf("b%d", k)})
	}
	return ops
}

// update1000 is request i's body: one update of one block of the chain.
func update1000(i int) []byte {
	k := 1 + i%999
	return fmt.Appendf(nil, `{"ops":[{"operation_type":"update","block_id":"b%d","params":{"message":"{{ steps.b%d.output }} %d"}}]}`, k, k-1, i)
}

func (p patch1000Blocks) Run(ctx context.Context, env Env) ([]Result, error) {
	acct, keyed, err := signUpKeyed(ctx, env, p.Name())
	if err != nil {
		return nil, fmt.Errorf("setup: %w", err)
	}
	wf, err := createWorkflow(ctx, keyed, apiclient.CreateWorkflowRequest{Name: "bench-1000-blocks"})
	if err != nil {
		return nil, fmt.Errorf("setup: %w", err)
	}
	defer deleteWorkflows(context.WithoutCancel(ctx), env, keyed, []string{wf.ID})
	opsPath := "/api/workflows/" + wf.ID + "/operations"
	ops := blocks1000()
	began := time.Now()
	for start := 0; start < len(ops); start += maxOpsPerRequest {
		chunk := ops[start:min(start+maxOpsPerRequest, len(ops))]
		out, err := applyOps(ctx, keyed, wf.ID, chunk)
		if err != nil {
			return nil, fmt.Errorf("setup: %w", err)
		}
		if err := out.applied(len(chunk), 0, start+len(chunk) < len(ops)); err != nil {
			return nil, fmt.Errorf("setup: ops %d–%d: %w", start, start+len(chunk)-1, err)
		}
	}
	env.Log("  built %s: 1,000 blocks, 999 edges (%d ops) in %s", wf.ID, len(ops), time.Since(began).Round(10*time.Millisecond))

	t := Target{
		Method: http.MethodPost,
		URL:    env.GatewayURL + opsPath,
		Header: http.Header{"X-Api-Key": {acct.key}, "Content-Type": {"application/json"}},
		Expect: http.StatusOK,
		Check:  patchApplied(1, 0, true),
	}
	phase := env.phase(t)
	bodies := make([][]byte, phase.Requests())
	for i := range bodies {
		bodies[i] = update1000(i)
	}
	phase.Target.Prepare = func(i int, req *http.Request) { setBody(req, bodies[i]) }

	env.Log("  POST %s (1 update) at %g/s", opsPath, env.Rate)
	st, err := env.Generator.Run(ctx, phase)
	if err != nil {
		return nil, err
	}
	return []Result{{
		Scenario: p.Name(), Phase: "1 update of a 1,000-block workflow via gateway", Stats: st,
		Note: patchFinding(st, "patch of a 1,000-block workflow", patch1000Target),
	}}, nil
}

// patchAnswer is the part of the patch endpoint's answer bench checks.
type patchAnswer struct {
	OK               bool              `json:"ok"`
	Version          int               `json:"version"`
	Summary          string            `json:"summary"`
	SkippedItems     []json.RawMessage `json:"skipped_items"`
	ValidationErrors []json.RawMessage `json:"validation_errors"`
}

// applied fails unless every one of n ops applied, the version is wantVersion (0: any), and
// the workflow is valid unless invalidOK.
func (a patchAnswer) applied(n, wantVersion int, invalidOK bool) error {
	switch {
	case !a.OK || len(a.SkippedItems) > 0:
		return fmt.Errorf("not every op applied: %s", clip(a.Summary, 200))
	case a.Summary != fmt.Sprintf("Applied all %d operation(s) successfully.", n):
		return fmt.Errorf("summary %q, want all %d applied", clip(a.Summary, 200), n)
	case wantVersion != 0 && a.Version != wantVersion:
		return fmt.Errorf("version %d, want %d (a workflow patched twice?)", a.Version, wantVersion)
	case !invalidOK && len(a.ValidationErrors) > 0:
		return fmt.Errorf("%d validation errors, first %s", len(a.ValidationErrors), clip(string(a.ValidationErrors[0]), 200))
	}
	return nil
}

// patchApplied is a Target.Check for the patch endpoint: see patchAnswer.applied. The
// 100-op batch builds an http.request chain without a trigger, which is valid as a patch but
// not as a workflow (no_trigger, like the in-process benchmark), hence invalidOK there.
func patchApplied(n, wantVersion int, valid bool) func([]byte) error {
	return func(body []byte) error {
		var a patchAnswer
		if err := json.Unmarshal(body, &a); err != nil {
			return fmt.Errorf("decode: %w", err)
		}
		return a.applied(n, wantVersion, !valid)
	}
}

// setBody makes b the body of req, as http.NewRequest would have.
func setBody(req *http.Request, b []byte) {
	req.Body = io.NopCloser(bytes.NewReader(b))
	req.GetBody = func() (io.ReadCloser, error) { return io.NopCloser(bytes.NewReader(b)), nil }
	req.ContentLength = int64(len(b))
}

// deleteWorkflows removes what a scenario created, so runs do not pile workflows up in the
// database; ids left empty (never created) are passed over. A failure is logged, not
// returned: it takes nothing from what was measured.
func deleteWorkflows(ctx context.Context, env Env, keyed *apiclient.Client, ids []string) {
	err := forEach(ctx, len(ids), setupWorkers, func(ctx context.Context, i int) error {
		if ids[i] == "" {
			return nil
		}
		return keyed.DeleteWorkflow(ctx, "", ids[i])
	})
	if err != nil {
		env.Log("  cleanup: %v", err)
	}
}

// patchFinding says whether the phase met its p99 target, at the rate it ran.
func patchFinding(st Stats, what string, target time.Duration) string {
	if st.TransportErrors+st.StatusErrors > 0 {
		return fmt.Sprintf("errors in the phase: target (issue 4: %s p99 ≤ %d ms) not checked.", what, target.Milliseconds())
	}
	return fmt.Sprintf("target (issue 4: %s p99 ≤ %d ms) at %.0f/s: p99 %s ms, %s.",
		what, target.Milliseconds(), st.TargetRate, millis(st.P99), verdict(st.P99 <= target))
}
