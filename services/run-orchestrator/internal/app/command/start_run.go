package command

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"strings"

	"github.com/santhosh-tekuri/jsonschema/v6"

	"svc.dev/libs/pgdb"
	"svc.dev/libs/wire"
	"svc.dev/services/run-orchestrator/internal/app/port"
	"svc.dev/services/run-orchestrator/internal/domain/run"
)

// StartRun asks for a run of a workflow of an organization.
type StartRun struct {
	OrganizationID string
	Workflow       port.WorkflowRef
	// Input is the run input as JSON; empty means null.
	Input          json.RawMessage
	IdempotencyKey string
	// Trigger is the run's trigger object ({"kind":"manual", ...}).
	Trigger json.RawMessage
}

// Started is the outcome of a StartRun.
type Started struct {
	RunID        string
	Deduplicated bool
}

// dispatchError is a store failure before anything was stored: *port.UnavailableError (503) when
// Postgres could not be reached, else *port.DispatchError (500 dispatch_failed).
func dispatchError(msg string, err error) error {
	if pgdb.Unavailable(err) {
		return &port.UnavailableError{Message: msg, Err: err}
	}
	return &port.DispatchError{Message: msg, Err: err}
}

// compileInputSchema compiles the trigger block's input_schema; nil when it has none.
func compileInputSchema(def run.Definition) (*jsonschema.Schema, error) {
	var schema any
	for _, b := range def.Blocks {
		if strings.HasPrefix(b.Type, "trigger.") {
			schema = b.Params["input_schema"]
			break
		}
	}
	if schema == nil {
		return nil, nil
	}
	raw, err := json.Marshal(schema)
	if err != nil {
		return nil, &port.DispatchError{Message: "the trigger's input_schema could not be read", Err: err}
	}
	doc, err := jsonschema.UnmarshalJSON(bytes.NewReader(raw))
	if err != nil {
		return nil, &port.DispatchError{Message: "the trigger's input_schema could not be read", Err: err}
	}
	c := jsonschema.NewCompiler()
	if err := c.AddResource("input_schema.json", doc); err != nil {
		return nil, &port.DispatchError{Message: "the trigger's input_schema could not be read", Err: err}
	}
	sch, err := c.Compile("input_schema.json")
	if err != nil {
		return nil, &port.DispatchError{Message: "the trigger's input_schema does not compile", Err: err}
	}
	return sch, nil
}

// checkKey refuses an idempotency key that is not text Postgres can store and compare:
// invalid UTF-8 (a header may carry any byte) or control characters such as NUL.
func checkKey(key string) error {
	if !wire.PlainText(key) {
		return &run.InvalidInputError{Issues: []run.Issue{{Path: "/idempotencyKey",
			Message: "the idempotency key must be UTF-8 text without control characters"}}}
	}
	return nil
}

// plainID reports whether id (or a name) could be a workflow's: UTF-8 text without control characters
// (a path may carry %FF or %00, which the editor's internal API cannot even be sent).
func plainID(id string) bool {
	return wire.PlainText(id) && len(id) <= 1000
}

// validateInput checks input against the JSON boundary's rules (wire.CheckJSON: callers of
// the internal API, the scheduler and webhook-ingress, pass the same rules as HTTP clients)
// and against sch (nil: anything goes): nil or *run.InvalidInputError.
func validateInput(sch *jsonschema.Schema, input json.RawMessage) error {
	if e := wire.CheckJSON(input); e != nil {
		return &run.InvalidInputError{Issues: []run.Issue{{Path: "/input" + e.Pointer, Message: e.Message}}}
	}
	if sch == nil {
		return nil
	}
	inst, err := jsonschema.UnmarshalJSON(bytes.NewReader(input))
	if err != nil {
		return &run.InvalidInputError{Issues: []run.Issue{{Path: "/input", Message: "input is not valid JSON"}}}
	}
	err = sch.Validate(inst)
	var ve *jsonschema.ValidationError
	if !errors.As(err, &ve) {
		return nil
	}
	var issues []run.Issue
	collect(ve.BasicOutput(), &issues)
	if len(issues) == 0 {
		issues = []run.Issue{{Path: "/input", Message: ve.Error()}}
	}
	return &run.InvalidInputError{Issues: issues}
}

func collect(u *jsonschema.OutputUnit, out *[]run.Issue) {
	if u == nil {
		return
	}
	if u.Error != nil && len(u.Errors) == 0 {
		*out = append(*out, run.Issue{Path: "/input" + u.InstanceLocation, Message: fmt.Sprint(u.Error)})
	}
	for i := range u.Errors {
		collect(&u.Errors[i], out)
	}
}
