package command

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"slices"
	"strings"
	"sync"

	"github.com/santhosh-tekuri/jsonschema/v6"
	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/metric"
	"go.opentelemetry.io/otel/metric/noop"

	"svc.dev/libs/wire"
	"svc.dev/services/run-orchestrator/internal/app/port"
	"svc.dev/services/run-orchestrator/internal/domain/run"
)

// MaxStartRuns is the most starts one batch may hold.
const MaxStartRuns = 500

// snapshotFetches is how many editor calls one batch has in flight.
const snapshotFetches = 8

// TooManyStartsError says a batch holds more than MaxStartRuns starts: nothing was started.
type TooManyStartsError struct{ N int }

func (e *TooManyStartsError) Error() string {
	return fmt.Sprintf("a batch holds at most %d starts, got %d", MaxStartRuns, e.N)
}

// StartRunResult is the answer to one start of a batch: the run, or Err, which is
// run.ErrWorkflowNotFound, *run.InvalidWorkflowError or *run.InvalidInputError.
type StartRunResult struct {
	Started Started
	Err     error
}

// StartRunsHandler dispatches a batch of runs (the scheduler's ticks): each distinct workflow is
// read from the editor once, each distinct input_schema compiled once, the idempotency keys
// looked up in one query, and every new run stored in one transaction. Each start is answered
// as StartRunHandler answers it alone, taken in order: a key an earlier start of the batch
// used names that start's run.
type StartRunsHandler struct {
	catalog port.WorkflowCatalog
	engine  port.Engine
	cache   *SnapshotCache // nil: every batch reads the editor
	started metric.Int64Counter
}

// NewStartRunsHandler returns the handler; both ports are required.
func NewStartRunsHandler(catalog port.WorkflowCatalog, engine port.Engine) StartRunsHandler {
	if catalog == nil || engine == nil {
		panic("nil catalog or engine")
	}
	return StartRunsHandler{catalog: catalog, engine: engine, started: startedCounter(noop.NewMeterProvider())}
}

// WithMeter returns the handler counting the runs it starts (svc_runs_started_total) on mp.
func (h StartRunsHandler) WithMeter(mp metric.MeterProvider) StartRunsHandler {
	h.started = startedCounter(mp)
	return h
}

// The trigger kinds a run is started by: the internal RPC accepts no other, and a start with
// no trigger is a manual one (normalTrigger).
var triggerKinds = []string{"manual", "schedule", "webhook"} //nolint:gochecknoglobals // fixed label set

// startedCounter is svc_runs_started_total on mp, every trigger kind's series present from
// the start (at 0) so that a rate over it never begins with a missing series.
func startedCounter(mp metric.MeterProvider) metric.Int64Counter {
	c, err := mp.Meter("svc.dev/services/run-orchestrator").Int64Counter("svc_runs_started_total",
		metric.WithDescription("Runs started and stored, by trigger kind (manual, schedule, webhook); a start answered with an earlier run of its idempotency key is not counted."),
		metric.WithUnit("{run}"))
	if err != nil {
		panic(fmt.Sprintf("runs started counter: %v", err)) // only for an invalid name
	}
	for _, k := range triggerKinds {
		c.Add(context.Background(), 0, metric.WithAttributes(attribute.String("trigger", k)))
	}
	return c
}

// triggerKind is the kind of the run's trigger object, one of triggerKinds ("manual" for one
// that names none it knows: the label set stays fixed).
func triggerKind(trigger json.RawMessage) string {
	var t struct {
		Kind string `json:"kind"`
	}
	if json.Unmarshal(trigger, &t) == nil && slices.Contains(triggerKinds, t.Kind) {
		return t.Kind
	}
	return "manual"
}

// WithCache returns the handler reading workflows through cache (nil: none).
func (h StartRunsHandler) WithCache(cache *SnapshotCache) StartRunsHandler {
	h.cache = cache
	return h
}

// workflowKey names one editor lookup: the same workflow reference of the same organization.
type workflowKey struct {
	org string
	ref port.WorkflowRef
}

// idemKey is an idempotency key of an organization.
type idemKey struct{ org, key string }

// prepared is a workflow as a batch uses it: the snapshot, its parsed definition and its
// compiled input schema, or why none of its starts can run.
type prepared struct {
	snap   port.Snapshot
	def    run.Definition
	schema *jsonschema.Schema
	conc   *run.Concurrency // the trigger's concurrency declaration (nil: none)
	err    error
}

// Handle answers every start of cmds, in order. The error is *TooManyStartsError, an
// *port.UnavailableError (the editor or the store could not be reached) or a *port.DispatchError: then
// nothing was stored.
func (h StartRunsHandler) Handle(ctx context.Context, cmds []StartRun) ([]StartRunResult, error) {
	if len(cmds) > MaxStartRuns {
		return nil, &TooManyStartsError{N: len(cmds)}
	}
	out := make([]StartRunResult, len(cmds))
	if len(cmds) == 0 {
		return out, nil
	}

	// A key that is not storable text is its item's error, and takes no part in the lookup
	// (lookup is cmds with such keys blanked; nil while there are none).
	var lookup []StartRun
	for i, c := range cmds {
		if err := checkKey(c.IdempotencyKey); err != nil {
			if lookup == nil {
				lookup = slices.Clone(cmds)
			}
			lookup[i].IdempotencyKey, out[i] = "", StartRunResult{Err: err}
		}
	}
	if lookup == nil {
		lookup = cmds
	}
	// A redelivery costs no editor call: keys already used are answered first.
	known, err := h.knownKeys(ctx, lookup)
	if err != nil {
		return nil, err
	}
	pending := make([]int, 0, len(cmds))
	for i, c := range cmds {
		if out[i].Err != nil {
			continue
		}
		if id := known[idemKey{c.OrganizationID, c.IdempotencyKey}]; c.IdempotencyKey != "" && id != "" {
			out[i] = StartRunResult{Started: Started{RunID: id, Deduplicated: true}}
			continue
		}
		pending = append(pending, i)
	}
	if len(pending) == 0 {
		return out, nil
	}
	workflows, err := h.workflows(ctx, cmds, pending)
	if err != nil {
		return nil, err
	}

	var (
		runs     []run.NewRun
		keys     []string
		runOf    = make([]int, len(cmds)) // index in runs of the run that answers cmds[i]; -1: none
		keyOwner = map[idemKey]int{}      // the index in runs holding a key of this batch
		owns     = make([]bool, len(cmds))
	)
	for i := range runOf {
		runOf[i] = -1
	}
	for _, i := range pending {
		c := cmds[i]
		k := idemKey{c.OrganizationID, c.IdempotencyKey}
		if c.IdempotencyKey != "" {
			if j, ok := keyOwner[k]; ok {
				runOf[i] = j
				continue
			}
		}
		p := workflows[workflowKey{c.OrganizationID, c.Workflow}]
		if p.err != nil {
			out[i] = StartRunResult{Err: p.err}
			continue
		}
		input := normalInput(c.Input)
		if err := validateInput(p.schema, input); err != nil {
			out[i] = StartRunResult{Err: err}
			continue
		}
		group, err := groupOf(p.conc, input)
		if err != nil {
			out[i] = StartRunResult{Err: err}
			continue
		}
		runOf[i], owns[i] = len(runs), true
		if c.IdempotencyKey != "" {
			keyOwner[k] = len(runs)
		}
		runs = append(runs, run.NewRun{
			ID: wire.NewID(wire.Run), OrganizationID: c.OrganizationID, WorkflowID: p.snap.ID,
			WorkflowVersion: p.snap.Version, Definition: p.snap.Definition, Parsed: &p.def, Input: input, Trigger: normalTrigger(c.Trigger),
			Group: group,
		})
		keys = append(keys, c.IdempotencyKey)
	}
	if len(runs) == 0 {
		return out, nil
	}
	ids, err := h.engine.DispatchMany(ctx, runs, keys)
	if err != nil {
		return nil, dispatchError("the runs could not be stored; nothing was started", err)
	}
	for j, r := range runs {
		if ids[j] == r.ID { // stored: not a key a concurrent start took first
			h.started.Add(ctx, 1, metric.WithAttributes(attribute.String("trigger", triggerKind(r.Trigger))))
		}
	}
	for i, j := range runOf {
		if j < 0 {
			continue
		}
		// A start that shares an earlier start's key is that run, deduplicated; so is a start
		// whose key a concurrent start took first.
		out[i] = StartRunResult{Started: Started{RunID: ids[j], Deduplicated: !owns[i] || ids[j] != runs[j].ID}}
	}
	return out, nil
}

// knownKeys looks up every distinct idempotency key of cmds in one query.
func (h StartRunsHandler) knownKeys(ctx context.Context, cmds []StartRun) (map[idemKey]string, error) {
	var orgs, keys []string
	seen := map[idemKey]bool{}
	for _, c := range cmds {
		k := idemKey{c.OrganizationID, c.IdempotencyKey}
		if c.IdempotencyKey == "" || seen[k] {
			continue
		}
		seen[k] = true
		orgs, keys = append(orgs, k.org), append(keys, k.key)
	}
	if len(keys) == 0 {
		return nil, nil
	}
	ids, err := h.engine.RunsForKeys(ctx, orgs, keys)
	if err != nil {
		return nil, dispatchError("the run store is unavailable; nothing was started", err)
	}
	known := make(map[idemKey]string, len(ids))
	for i, id := range ids {
		if id != "" {
			known[idemKey{orgs[i], keys[i]}] = id
		}
	}
	return known, nil
}

// workflows reads each distinct workflow of cmds[pending...] from the editor once,
// snapshotFetches at a time, and prepares it; with a cache, the workflows it holds under
// their organization's current catalog epoch are not read at all. Any failure of the editor
// fails the batch.
func (h StartRunsHandler) workflows(ctx context.Context, cmds []StartRun, pending []int) (map[workflowKey]prepared, error) {
	var wanted []workflowKey
	seen := map[workflowKey]bool{}
	for _, i := range pending {
		k := workflowKey{cmds[i].OrganizationID, cmds[i].Workflow}
		if !seen[k] {
			seen[k] = true
			wanted = append(wanted, k)
		}
	}
	out := make(map[workflowKey]prepared, len(wanted))
	// The epochs are read before the editor is asked, so an entry is never stored under an
	// epoch newer than the state it was read from.
	var epochs map[string]int64
	if h.cache != nil {
		epochs = h.cache.epochsOf(ctx, wanted)
		missed := wanted[:0:0]
		for _, k := range wanted {
			if p, ok := h.cache.get(k, epochs[k.org]); ok {
				out[k] = p
			} else {
				missed = append(missed, k)
			}
		}
		wanted = missed
	}
	got := make([]prepared, len(wanted))
	errs := make([]error, len(wanted))
	sem := make(chan struct{}, snapshotFetches)
	var wg sync.WaitGroup
	for j, k := range wanted {
		sem <- struct{}{}
		wg.Go(func() {
			defer func() { <-sem }()
			snap, err := h.catalog.Workflow(ctx, k.org, k.ref)
			if errors.Is(err, run.ErrWorkflowNotFound) {
				got[j] = prepared{err: run.ErrWorkflowNotFound}
				return
			}
			if err != nil {
				errs[j] = err
				return
			}
			got[j] = prepare(snap)
		})
	}
	wg.Wait()
	if err := errors.Join(errs...); err != nil {
		// The catalog's errors other than not-found all mean the editor could not answer: a
		// transient state, 503 like every other peer outage.
		return nil, &port.UnavailableError{Message: "the workflow editor is unreachable; nothing was started", Err: err}
	}
	for j, k := range wanted {
		out[k] = got[j]
		if h.cache != nil {
			h.cache.put(k, got[j], epochs[k.org])
		}
	}
	return out, nil
}

// prepare checks a snapshot once for all the starts of its workflow. A definition or an
// input_schema that cannot be read makes its starts workflow_invalid, so one broken workflow
// never fails the starts of the others in a batch.
func prepare(snap port.Snapshot) prepared {
	if len(snap.ValidationErrors) > 0 {
		return prepared{err: &run.InvalidWorkflowError{Errors: snap.ValidationErrors}}
	}
	def, err := run.ParseDefinition(snap.Definition)
	if err != nil {
		return prepared{err: &run.InvalidWorkflowError{Errors: []run.ValidationError{{
			Code: "definition_unreadable", Message: "the workflow definition could not be read: " + err.Error()}}}}
	}
	sch, err := compileInputSchema(def)
	if err != nil {
		return prepared{err: &run.InvalidWorkflowError{Errors: []run.ValidationError{{
			Code: "input_schema_invalid", Message: err.Error()}}}}
	}
	conc, err := run.ParseConcurrency(def)
	if err != nil {
		return prepared{err: &run.InvalidWorkflowError{Errors: []run.ValidationError{{
			Code: "concurrency_invalid", Message: err.Error()}}}}
	}
	return prepared{snap: snap, def: def, schema: sch, conc: conc}
}

// groupOf is the concurrency group of a run of a workflow declaring conc (nil: none), its
// key evaluated over the run's input. A key that cannot be evaluated refuses the start (400
// invalid_body, nothing stored) rather than failing the run later: the caller sent the input,
// and can send it again with the field the key reads.
func groupOf(conc *run.Concurrency, input json.RawMessage) (*run.Group, error) {
	if conc == nil {
		return nil, nil
	}
	var v any
	if err := json.Unmarshal(input, &v); err != nil {
		return nil, &run.InvalidInputError{Issues: []run.Issue{{Path: "", Message: "the input is not JSON: " + err.Error()}}}
	}
	g, err := conc.GroupOf(v)
	if err != nil {
		msg := fmt.Sprintf("the workflow limits concurrency per key %q, and %s", conc.Template, strings.TrimPrefix(err.Error(), "concurrency key: "))
		return nil, &run.InvalidInputError{Issues: []run.Issue{{Path: "", Message: msg}},
			Reason: "the run input gives no concurrency key: " + msg}
	}
	return &g, nil
}

// normalInput is the run input: empty means null.
func normalInput(in json.RawMessage) json.RawMessage {
	if len(bytes.TrimSpace(in)) == 0 {
		return json.RawMessage("null")
	}
	return in
}

// normalTrigger is the run's trigger object: empty means a manual start.
func normalTrigger(t json.RawMessage) json.RawMessage {
	if len(t) == 0 {
		return json.RawMessage(`{"kind":"manual"}`)
	}
	return t
}
