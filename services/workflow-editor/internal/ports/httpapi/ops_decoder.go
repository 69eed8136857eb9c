package httpapi

import (
	"bytes"
	"encoding/json"
	"fmt"
	"sort"
	"strings"

	"svc.dev/libs/web"
	"svc.dev/libs/wire"
	"svc.dev/proto/errs"
	"svc.dev/services/workflow-editor/internal/domain/workflow"
)

// MaxOps is the most operations one patch may carry (docs/API.md, "Limits").
const MaxOps = 500

// maxIssues bounds the issues of one invalid_body answer.
const maxIssues = 20

// opMembers are the members an operation may have; any other is refused, so that a misspelt
// member ("target", "parms") is reported instead of silently ignored.
func opMembers() []string {
	return []string{"operation_type", "block_id", "type", "params", "target_block_id", "branch"}
}

// decodeOps reads a patch body: exactly {"ops": [operation, ...]} with at most MaxOps
// operations, each an object of known members with values of the right JSON type. Anything
// else is one invalid_body error listing every problem found, and nothing is applied. Whether
// an operation makes sense (its type, its ids, its params) is the applier's to judge, one by
// one, as skips.
func decodeOps(raw []byte) ([]workflow.Op, error) {
	var body struct {
		Ops *[]json.RawMessage `json:"ops"`
	}
	if err := web.DecodeBytes(raw, &body); err != nil {
		return nil, err
	}
	if body.Ops == nil {
		return nil, web.InvalidBody(wire.Issue{Path: "/ops", Message: `ops is required: send {"ops": [operation, ...]}`})
	}
	if n := len(*body.Ops); n > MaxOps {
		return nil, web.InvalidBody(wire.Issue{Path: "/ops", Message: fmt.Sprintf("ops has %d operations; at most %d are allowed per request: split the batch", n, MaxOps)})
	}
	ops := make([]workflow.Op, 0, len(*body.Ops))
	var issues []wire.Issue
	for i, rawOp := range *body.Ops {
		op, opIssues := decodeOp(rawOp, wire.Pointer("ops", i))
		issues = append(issues, opIssues...)
		ops = append(ops, op)
	}
	if len(issues) > 0 {
		return nil, invalidBody(issues)
	}
	return ops, nil
}

func invalidBody(issues []wire.Issue) *errs.Error {
	if len(issues) > maxIssues {
		issues = issues[:maxIssues]
	}
	return web.InvalidBody(issues...)
}

// decodeOp reads one operation object; at is its JSON Pointer in the body.
func decodeOp(raw json.RawMessage, at string) (workflow.Op, []wire.Issue) {
	var members map[string]json.RawMessage
	dec := json.NewDecoder(bytes.NewReader(raw))
	if err := dec.Decode(&members); err != nil || members == nil {
		return workflow.Op{}, []wire.Issue{{Path: at, Message: "an operation must be a JSON object such as {\"operation_type\":\"add\",\"block_id\":\"fetch\",\"type\":\"http.request\",\"params\":{...}}"}}
	}
	var (
		op     workflow.Op
		issues []wire.Issue
	)
	str := func(name string, dst *string) {
		v, ok := members[name]
		if !ok || string(v) == "null" {
			return
		}
		if err := json.Unmarshal(v, dst); err != nil {
			issues = append(issues, wire.Issue{Path: at + wire.Pointer(name), Message: name + " must be a string"})
		}
	}
	str("operation_type", &op.Type)
	str("block_id", &op.BlockID)
	str("type", &op.BlockType)
	str("target_block_id", &op.TargetBlockID)
	if v, ok := members["branch"]; ok && string(v) != "null" {
		// A branch that is not a string (true, 1) is the applier's to judge, as a skip of this
		// operation alone: it names the string meant.
		var b string
		if err := json.Unmarshal(v, &b); err != nil {
			raw := string(bytes.TrimSpace(v))
			op.BranchJSON = &raw
		} else {
			op.Branch = &b
		}
	}
	if v, ok := members["params"]; ok && string(v) != "null" {
		params, err := decodeParams(v)
		if err != nil {
			issues = append(issues, wire.Issue{Path: at + "/params", Message: "params must be a JSON object of param names to values"})
		} else {
			op.Params, op.HasParams = params, true
		}
	}
	known := map[string]bool{}
	for _, m := range opMembers() {
		known[m] = true
	}
	names := make([]string, 0, len(members))
	for name := range members {
		names = append(names, name)
	}
	sort.Strings(names)
	for _, name := range names {
		if !known[name] {
			msg := fmt.Sprintf("unknown member %q of an operation; members are %s", name, strings.Join(opMembers(), ", "))
			if dym := suggestMember(name); dym != "" {
				msg += fmt.Sprintf("; did you mean %q?", dym)
			}
			issues = append(issues, wire.Issue{Path: at + wire.Pointer(name), Message: msg})
		}
	}
	return op, issues
}

// decodeParams reads a params object keeping numbers exact (json.Number).
func decodeParams(raw json.RawMessage) (map[string]any, error) {
	dec := json.NewDecoder(bytes.NewReader(raw))
	dec.UseNumber()
	var params map[string]any
	if err := dec.Decode(&params); err != nil {
		return nil, err
	}
	if params == nil {
		return nil, fmt.Errorf("not an object")
	}
	return params, nil
}

// suggestMember guesses the member a misspelt one meant.
func suggestMember(name string) string {
	n := strings.ToLower(strings.NewReplacer("-", "", "_", "", " ", "").Replace(name))
	switch n {
	case "op", "operation", "operationtype", "optype", "kind", "action":
		return "operation_type"
	case "id", "block", "blockid", "source", "from", "sourceblockid", "sourceid":
		return "block_id"
	case "target", "to", "targetid", "targetblock", "targetblockid", "dest", "destination":
		return "target_block_id"
	case "blocktype", "connector", "connectortype":
		return "type"
	case "param", "parms", "parameters", "args", "arguments", "config", "inputs", "input":
		return "params"
	case "branches", "when", "label":
		return "branch"
	}
	return ""
}
