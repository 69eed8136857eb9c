package run

import (
	"encoding/json"
	"errors"
	"fmt"
	"math"
	"strconv"
	"strings"
	"time"

	"svc.dev/proto/connectors"
	"svc.dev/proto/connectors/expression"
)

// A workflow's trigger may declare concurrency: {limit, key?}: at most limit runs of the
// workflow whose key evaluates to the same value are in progress at once; the others stay
// queued, in start order, until one of them ends. The key is a template over the run input
// only, so a tenant can keep its own customers apart ("{{ input.customer }}").

// The bounds of a concurrency declaration.
const (
	MaxConcurrencyLimit = 1000
	// MaxConcurrencyKeyBytes bounds the key's value: it is stored on every run of the group,
	// indexed, and shown in messages.
	MaxConcurrencyKeyBytes = 200
	// maxKeyTemplateBytes bounds the key's template, which is compiled at every dispatch of a
	// workflow not in the snapshot cache.
	maxKeyTemplateBytes = 1024
	// A key is a field or two of the input, not a computation: its evaluation, in the start
	// request, gets a small budget of its own (the same bounded evaluator as templates).
	keySteps, keyBytes, keyTime = 1000, 64 << 10, 5 * time.Millisecond
)

// ConcurrencyParam is the trigger param that declares the limit.
const ConcurrencyParam = "concurrency"

// QueueReasonConcurrency is the reason a run held back by its workflow's limit shows.
const QueueReasonConcurrency = "concurrency_limit"

// Concurrency is a workflow's concurrency declaration, parsed and compiled once per pinned
// definition.
type Concurrency struct {
	Limit int
	// Template is the key as written ("" when the declaration has none: one group for the
	// whole workflow).
	Template string
	segs     []keySegment
}

type keySegment struct {
	text string
	prog *expression.Program // nil: literal text
}

// Group is the concurrency group one run belongs to, decided at its dispatch.
type Group struct {
	Key   string
	Limit int
}

// Queued says why a queued run is held back: a run that waits for a slot of its concurrency
// group. InProgress is how many runs of the group were in progress when it was read.
type Queued struct {
	Reason     string `json:"reason"`
	Key        string `json:"key"`
	Limit      int    `json:"limit"`
	InProgress int    `json:"in_progress"`
	// Ahead is, for a run waiting for a worker (QueueReasonWorker), how many jobs are queued
	// before its job (at most MaxAhead), and AheadOwn how many of them are its organization's.
	Ahead    int `json:"ahead,omitempty"`
	AheadOwn int `json:"ahead_own,omitempty"`
}

// QueueReasonWorker is the reason of a queued run whose job waits in the queue for a worker.
const QueueReasonWorker = "waiting_for_worker"

// MaxAhead is the most jobs ahead a run's queue position counts.
const MaxAhead = 10000

// Message says in words why the run waits.
func (q *Queued) Message() string {
	if q.Reason == QueueReasonWorker {
		return q.workerMessage()
	}
	of := "runs of this workflow"
	if q.Key != "" {
		of += " with key " + strconv.Quote(q.Key)
	}
	return fmt.Sprintf("waiting for a slot: %d of %d %s are in progress", q.InProgress, q.Limit, of)
}

func (q *Queued) workerMessage() string {
	ahead := strconv.Itoa(q.Ahead)
	if q.Ahead >= MaxAhead {
		ahead = "over " + strconv.Itoa(MaxAhead)
	}
	jobs := ahead + " jobs"
	if q.Ahead == 1 {
		jobs = "1 job"
	}
	switch {
	case q.Ahead == 0:
		return "waiting for a worker: next in line"
	case q.AheadOwn == q.Ahead:
		return fmt.Sprintf("waiting for a worker: organization at its share (%s of this organization queued ahead)", jobs)
	case q.AheadOwn > 0:
		return fmt.Sprintf("waiting for a worker: %s queued ahead, %d of them this organization's (organizations take turns)", jobs, q.AheadOwn)
	default:
		return fmt.Sprintf("waiting for a worker: %s of other organizations queued ahead (organizations take turns)", jobs)
	}
}

// KeyError says why a run's concurrency key could not be evaluated over its input: the start
// is refused (400 invalid_body), nothing is stored.
type KeyError struct{ Reason string }

func (e *KeyError) Error() string { return "concurrency key: " + e.Reason }

// ParseConcurrency reads the trigger's concurrency declaration of def (nil when it has none)
// and compiles its key. The editor refuses a malformed declaration; a definition stored
// before it did is an error here.
func ParseConcurrency(def Definition) (*Concurrency, error) {
	for _, b := range def.Blocks {
		if !strings.HasPrefix(b.Type, "trigger.") {
			continue
		}
		raw, ok := b.Params[ConcurrencyParam]
		if !ok || raw == nil {
			continue
		}
		c, err := parseConcurrency(raw)
		if err != nil {
			return nil, fmt.Errorf("block %q: %s: %w", b.ID, ConcurrencyParam, err)
		}
		return c, nil
	}
	return nil, nil
}

func parseConcurrency(raw any) (*Concurrency, error) {
	m, ok := raw.(map[string]any)
	if !ok {
		return nil, errors.New("must be an object {limit, key?}")
	}
	limit, err := limitOf(m["limit"])
	if err != nil {
		return nil, err
	}
	c := &Concurrency{Limit: limit}
	switch k := m["key"].(type) {
	case nil:
		return c, nil
	case string:
		if len(k) > maxKeyTemplateBytes {
			return nil, fmt.Errorf("key may be at most %d bytes", maxKeyTemplateBytes)
		}
		c.Template = k
	default:
		return nil, errors.New("key must be a string")
	}
	segs, err := connectors.SplitTemplate(c.Template)
	if err != nil {
		return nil, fmt.Errorf("key: %w", err)
	}
	for _, s := range segs {
		if !s.Expr {
			c.segs = append(c.segs, keySegment{text: s.Text})
			continue
		}
		prog, err := expression.Compile(s.Text)
		if err != nil {
			return nil, fmt.Errorf("key: expression %q: %w", s.Text, err)
		}
		c.segs = append(c.segs, keySegment{text: s.Text, prog: prog})
	}
	return c, nil
}

func limitOf(v any) (int, error) {
	var f float64
	switch n := v.(type) {
	case json.Number:
		var err error
		if f, err = n.Float64(); err != nil {
			return 0, errors.New("limit must be an integer")
		}
	case float64:
		f = n
	case int:
		f = float64(n)
	default:
		return 0, fmt.Errorf("limit must be an integer from 1 to %d", MaxConcurrencyLimit)
	}
	if f != math.Trunc(f) || f < 1 || f > MaxConcurrencyLimit {
		return 0, fmt.Errorf("limit must be an integer from 1 to %d", MaxConcurrencyLimit)
	}
	return int(f), nil
}

// GroupOf evaluates the key over a run's input (decoded as the interpreter decodes it): each
// {{ }} must give a string or a number, and the key at most MaxConcurrencyKeyBytes.
func (c *Concurrency) GroupOf(input any) (Group, error) {
	var b strings.Builder
	scope := map[string]any{"input": input}
	budget := expression.NewBudget(expression.Limits{Timeout: keyTime, Steps: keySteps, Bytes: keyBytes, Inline: true})
	for _, s := range c.segs {
		if s.prog == nil {
			b.WriteString(s.text)
			continue
		}
		out, err := s.prog.Run(scope, budget)
		if err != nil {
			return Group{}, &KeyError{Reason: fmt.Sprintf("{{ %s }} failed over this input: %s", s.text, err)}
		}
		switch x := out.(type) {
		case string:
			b.WriteString(x)
		case float64:
			b.WriteString(strconv.FormatFloat(x, 'f', -1, 64))
		case int:
			b.WriteString(strconv.Itoa(x))
		case int64:
			b.WriteString(strconv.FormatInt(x, 10))
		case json.Number:
			b.WriteString(x.String())
		default:
			return Group{}, &KeyError{Reason: fmt.Sprintf("{{ %s }} gave %s over this input; it must give a string or a number (does the input have that field?)", s.text, kindOf(out))}
		}
		if b.Len() > MaxConcurrencyKeyBytes {
			break
		}
	}
	if b.Len() > MaxConcurrencyKeyBytes {
		return Group{}, &KeyError{Reason: fmt.Sprintf("the key %q evaluates to more than %d bytes", c.Template, MaxConcurrencyKeyBytes)}
	}
	return Group{Key: b.String(), Limit: c.Limit}, nil
}

func kindOf(v any) string {
	switch v.(type) {
	case nil:
		return "null"
	case bool:
		return "a boolean"
	case map[string]any:
		return "an object"
	case []any:
		return "an array"
	default:
		return fmt.Sprintf("a %T", v)
	}
}
