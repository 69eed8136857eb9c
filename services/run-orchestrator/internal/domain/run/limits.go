package run

import (
	"encoding/json"
	"fmt"
	"strings"
	"time"
	"unicode/utf8"
)

// Bounds on what a run keeps (issue 21): every organization's runs share the same workers,
// database and API, so no attempt's output, no error message and no run's output may grow
// without bound. An output is held in memory, stored in step_attempts and runs, put in every
// later block's template scope and sent by the logs, the run and the event stream.

// Error codes of attempts that break a bound. Neither is retried: an output or a param is
// what the block's inputs (the run's input, earlier outputs) and its definition make it, and
// a retry of the attempt sees the same ones.
const (
	// CodeInvalidParam: the attempt's params, as resolved, break its connector's schema.
	CodeInvalidParam = "invalid_param"
	// CodeOutputTooLarge: the attempt's output, or the run's, is over its bound.
	CodeOutputTooLarge = "output_too_large"
)

// Defaults of Limits.
const (
	// DefaultMaxAttemptOutput is the request body limit (1 MiB): what a client may send in, a
	// step may produce, and http.request fits its response into.
	DefaultMaxAttemptOutput = 1 << 20
	// DefaultMaxRunOutput bounds the sinks' outputs together.
	DefaultMaxRunOutput = 4 << 20
	// MaxErrorMessage is the most of an error message an attempt or a run keeps.
	MaxErrorMessage = 4 << 10
)

// Limits bounds what runs keep. A zero field takes its default.
type Limits struct {
	// AttemptOutput bounds an attempt's output JSON, in bytes. A trigger's output (the run's
	// input, bounded where it entered) is not held to it.
	AttemptOutput int
	// RunOutput bounds the run's output: the sum of its sinks' output JSON, in bytes. It is
	// at least AttemptOutput, so that one sink always fits.
	RunOutput int
}

func (l Limits) withDefaults() Limits {
	if l.AttemptOutput <= 0 {
		l.AttemptOutput = DefaultMaxAttemptOutput
	}
	if l.RunOutput <= 0 {
		l.RunOutput = DefaultMaxRunOutput
	}
	l.RunOutput = max(l.RunOutput, l.AttemptOutput)
	return l
}

// Option configures an Interpreter.
type Option func(*Interpreter)

// WithLimits sets the interpreter's bounds (default: DefaultMaxAttemptOutput,
// DefaultMaxRunOutput).
func WithLimits(l Limits) Option {
	return func(in *Interpreter) { in.limits = l.withDefaults() }
}

// CodePrivateNetworkRefused: an http.request whose destination, after DNS resolution, is a
// loopback, private or link-local address, which the private-network policy refuses
// (SVC_HTTP_ALLOW_PRIVATE=0). Not retried either: a retry dials the same address, under the
// same policy.
const CodePrivateNetworkRefused = "private_network_refused"

// final reports whether a failure with code would fail the same way on every retry, so that
// the block fails at once whatever its connector's retry policy allows.
func final(code string) bool {
	return code == CodeInvalidParam || code == CodeOutputTooLarge || code == CodePrivateNetworkRefused
}

// outputTooLarge says why block's output of n bytes cannot be kept, or "".
func (in *Interpreter) outputTooLarge(block Block, n int) string {
	if n <= in.limits.AttemptOutput || strings.HasPrefix(block.Type, "trigger.") {
		return ""
	}
	return fmt.Sprintf("the output is %d bytes of JSON, over the bound of %d bytes per attempt (SVC_ATTEMPT_OUTPUT_MAX_BYTES); "+
		"keep large data outside the run and pass a reference to it", n, in.limits.AttemptOutput)
}

// runOutputTooLarge checks the sinks' outputs together: it returns the largest sink and why
// they cannot be kept, or "", "".
func (in *Interpreter) runOutputTooLarge(sinks map[string]json.RawMessage) (block, message string) {
	total, largest := 0, 0
	for id, out := range sinks {
		total += len(out)
		if len(out) > largest || (len(out) == largest && id < block) {
			block, largest = id, len(out)
		}
	}
	if total <= in.limits.RunOutput {
		return "", ""
	}
	return block, fmt.Sprintf("the run's output (its %d sink blocks' outputs) is %d bytes of JSON, over the bound of %d bytes per run "+
		"(SVC_RUN_OUTPUT_MAX_BYTES); the largest is %s's, %d bytes", len(sinks), total, in.limits.RunOutput, block, largest)
}

// finishCompleted ends a run none of whose blocks is active: its output is its sinks', unless
// they are over the run's bound together; the run then fails (code output_too_large) on the
// largest sink.
func (in *Interpreter) finishCompleted(r *Run, o *Outcome, now time.Time) {
	sinks := r.State.Output(r.Def)
	block, msg := in.runOutputTooLarge(sinks)
	if msg == "" {
		finishCompleted(r, o, sinks)
		return
	}
	finish(r, o, StatusFailed, block, msg, now)
	o.Finish.Error, _ = json.Marshal(map[string]any{"block_id": block, "message": msg, "code": CodeOutputTooLarge})
}

// clipMessage keeps at most MaxErrorMessage bytes of an error message (cut at a character),
// saying so.
func clipMessage(msg string) string {
	if len(msg) <= MaxErrorMessage {
		return msg
	}
	cut := MaxErrorMessage
	for cut > 0 && !utf8.RuneStart(msg[cut]) {
		cut--
	}
	return msg[:cut] + fmt.Sprintf(" … [error message cut at %d of its %d bytes]", cut, len(msg))
}
