// Package jsonvalidate is the json.validate connector: it checks a value against a JSON
// Schema and outputs whether it matches, and where and why not.
package jsonvalidate

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"

	"github.com/santhosh-tekuri/jsonschema/v6"
	"golang.org/x/text/language"
	"golang.org/x/text/message"

	"svc.dev/proto/connectors"
)

// maxErrors bounds the violations listed in the output.
const maxErrors = 20

// Runtime is json.validate as the engine runs it: inline (in process, no effect but its
// result, the same result again), its schema kept as written.
func Runtime() connectors.Runtime {
	return connectors.Runtime{Type: "json.validate", Inline: true, AtDispatch: true, Raw: []string{"schema"},
		New: func(connectors.Config) connectors.Executor {
			printer := message.NewPrinter(language.English)
			return connectors.ExecutorFunc(func(_ context.Context, c connectors.Call) (connectors.Result, error) {
				return validate(printer, c.Params)
			})
		}}
}

// Violation is one place where the value breaks the schema.
type Violation struct {
	Path    string `json:"path"`
	Message string `json:"message"`
}

// InvalidError is a value that does not match, with fail_on_invalid set.
type InvalidError struct{ Violations []Violation }

func (e *InvalidError) Error() string {
	first := e.Violations[0]
	msg := fmt.Sprintf("the value does not match the schema: at %q: %s", pointerOrRoot(first.Path), first.Message)
	if n := len(e.Violations) - 1; n > 0 {
		msg += fmt.Sprintf(" (and %d more)", n)
	}
	return msg
}

// ErrorCode is the failed attempt's code.
func (e *InvalidError) ErrorCode() string { return "json_invalid" }

func validate(printer *message.Printer, params map[string]any) (connectors.Result, error) {
	schema, err := connectors.CompileClientSchema(params["schema"])
	if err != nil {
		return connectors.Result{}, fmt.Errorf("schema: %w", err)
	}
	value, err := connectors.ValidatorJSON(params["value"])
	if err != nil {
		return connectors.Result{}, fmt.Errorf("value: %w", err)
	}
	var violations []Violation
	if verr := schema.Validate(value); verr != nil {
		var ve *jsonschema.ValidationError
		if !errors.As(verr, &ve) {
			return connectors.Result{}, fmt.Errorf("validate: %w", verr)
		}
		violations = leaves(printer, ve, nil)
		slices.SortStableFunc(violations, func(a, b Violation) int { return strings.Compare(a.Path, b.Path) })
	}
	if len(violations) > 0 && params["fail_on_invalid"] == true {
		return connectors.Result{}, &InvalidError{Violations: violations}
	}
	out := map[string]any{"valid": len(violations) == 0, "errors": head(violations)}
	if len(violations) > maxErrors {
		out["more_errors"] = len(violations) - maxErrors
	}
	return connectors.Result{Output: out}, nil
}

// leaves are the violations at the bottom of e's tree of causes: each says where in the
// value and what rule it breaks.
func leaves(printer *message.Printer, e *jsonschema.ValidationError, out []Violation) []Violation {
	if len(e.Causes) == 0 {
		return append(out, Violation{Path: pointer(e.InstanceLocation), Message: e.ErrorKind.LocalizedString(printer)})
	}
	for _, c := range e.Causes {
		out = leaves(printer, c, out)
	}
	return out
}

// pointer is the JSON pointer of a location in the value.
func pointer(loc []string) string {
	var b strings.Builder
	for _, tok := range loc {
		b.WriteByte('/')
		b.WriteString(strings.ReplaceAll(strings.ReplaceAll(tok, "~", "~0"), "/", "~1"))
	}
	return b.String()
}

func pointerOrRoot(p string) string {
	if p == "" {
		return "/"
	}
	return p
}

// head is the first maxErrors violations, never nil.
func head(v []Violation) []Violation {
	if v == nil {
		return []Violation{}
	}
	return v[:min(len(v), maxErrors)]
}
