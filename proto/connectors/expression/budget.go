package expression

import (
	"encoding/json"
	"errors"
	"fmt"
	"time"
)

// Error codes of an evaluation stopped by its budget: an attempt that fails with one records
// it as its error's code.
const (
	// CodeBudgetExceeded: the evaluation ran out of time or steps, or would have allocated
	// more than its bytes.
	CodeBudgetExceeded = "expression_budget_exceeded"
	// CodeOutputTooLarge: what the evaluations produced (an attempt's resolved params) is
	// larger than its bytes.
	CodeOutputTooLarge = "expression_output_too_large"
)

// LimitError is an evaluation stopped by its budget. Code is one of the codes above.
type LimitError struct {
	Code    string
	Message string
	// Inline says the budget that ran out was the small one of an evaluation inside a
	// request or a transaction: the same work may finish under the full budget.
	Inline bool
}

func (e *LimitError) Error() string { return e.Message }

// AsLimit returns the LimitError in err's chain, or nil.
func AsLimit(err error) *LimitError {
	var le *LimitError
	if errors.As(err, &le) {
		return le
	}
	return nil
}

// Limits bound one budget. Zero fields are no bound.
type Limits struct {
	// Timeout bounds the wall time from the budget's start; it is checked every few loop
	// steps and before every bounded builtin, so an expression without loops never reads it.
	Timeout time.Duration
	// Steps bounds loop iterations (every closure body of map, filter, reduce, ...) and calls
	// of the bounded builtins, all evaluations of the budget together.
	Steps int64
	// Bytes bounds what the bounded builtins and operators allocate (checked before they
	// allocate), and, separately, the size of what the evaluations produce.
	Bytes int64
	// Inline marks the small budget of an evaluation inside a request or a transaction.
	Inline bool
}

// timeEvery is how many steps pass between two reads of the clock: a step costs tens of
// nanoseconds, a clock read about as much.
const timeEvery = 16

// meter is what an evaluation carries in its scope. It has no exported fields or methods: an
// expression can reach the scope ($env) and so the meter, and must not be able to change it.
type meter struct {
	limits   Limits
	deadline time.Time
	steps    int64
	alloc    int64
	out      int64
	err      *LimitError // sticky: once over, every later evaluation fails at once
}

// Budget is the budget shared by every evaluation of one attempt: all segments of all its
// params and its connector's own expression (a condition's). Not safe for concurrent use: an
// attempt is resolved by one goroutine.
type Budget struct{ m *meter }

// NewBudget starts a budget under l; its time runs from now.
func NewBudget(l Limits) *Budget {
	m := &meter{limits: l}
	if l.Timeout > 0 {
		m.deadline = time.Now().Add(l.Timeout)
	}
	return &Budget{m: m}
}

// Widen returns a budget under l that has already spent what b spent (its time runs from
// now): the work done under a small budget counts against the full one that takes over.
func (b *Budget) Widen(l Limits) *Budget {
	w := NewBudget(l)
	w.m.steps, w.m.alloc, w.m.out = b.m.steps, b.m.alloc, b.m.out
	return w
}

// Limits are the budget's limits.
func (b *Budget) Limits() Limits { return b.m.limits }

// Spent reports the steps, bytes allocated and bytes produced so far.
func (b *Budget) Spent() (steps, alloc, out int64) { return b.m.steps, b.m.alloc, b.m.out }

// Err is the limit the budget went over, or nil.
func (b *Budget) Err() error {
	if b.m.err == nil {
		return nil
	}
	return b.m.err
}

// Output charges n bytes of produced value (a resolved param, an interpolated piece).
func (b *Budget) Output(n int64) error { return b.m.output(n) }

// OutputOf charges the size of value v, as its JSON would be about, without walking more of
// it than the budget has left.
func (b *Budget) OutputOf(v any) error {
	if b.m.err != nil {
		return b.m.err
	}
	left := int64(-1)
	if b.m.limits.Bytes > 0 {
		left = b.m.limits.Bytes - b.m.out
	}
	return b.m.output(size(v, 0, 1, left))
}

// Alloc charges n bytes about to be allocated.
func (b *Budget) Alloc(n int64) error { return b.m.charge(n) }

func (m *meter) fail(code, format string, args ...any) *LimitError {
	m.err = &LimitError{Code: code, Message: fmt.Sprintf(format, args...), Inline: m.limits.Inline}
	return m.err
}

func (m *meter) tick() error {
	if m.err != nil {
		return m.err
	}
	m.steps++
	if m.limits.Steps > 0 && m.steps > m.limits.Steps {
		return m.fail(CodeBudgetExceeded, "expression budget exceeded: more than %d loop steps", m.limits.Steps)
	}
	if m.steps%timeEvery == 0 {
		return m.clock()
	}
	return nil
}

func (m *meter) clock() error {
	if !m.deadline.IsZero() && time.Now().After(m.deadline) {
		return m.fail(CodeBudgetExceeded, "expression budget exceeded: evaluation took more than %s", m.limits.Timeout)
	}
	return nil
}

// charge counts n bytes an operation is about to allocate, and the operation as a step.
func (m *meter) charge(n int64) error {
	if err := m.tick(); err != nil {
		return err
	}
	if n < 0 || (m.limits.Bytes > 0 && n > m.limits.Bytes-m.alloc) {
		return m.fail(CodeBudgetExceeded, "expression budget exceeded: it would allocate more than %d bytes", m.limits.Bytes)
	}
	m.alloc += n
	return m.clock()
}

func (m *meter) output(n int64) error {
	if m.err != nil {
		return m.err
	}
	if n < 0 || (m.limits.Bytes > 0 && n > m.limits.Bytes-m.out) {
		return m.fail(CodeOutputTooLarge, "expression output too large: the values produced exceed %d bytes", m.limits.Bytes)
	}
	m.out += n
	return nil
}

// Marshal is json.Marshal of v, its worst-case size charged to the budget first (a value
// interpolated into a string).
func (b *Budget) Marshal(v any) ([]byte, error) {
	left := int64(-1)
	if b.m.limits.Bytes > 0 {
		left = b.m.limits.Bytes - b.m.alloc
	}
	if err := b.m.charge(size(v, 0, jsonFactor, left)); err != nil {
		return nil, err
	}
	return json.Marshal(v)
}
