package web

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"strings"

	"svc.dev/libs/errs"
	"svc.dev/libs/wire"
)

// Decode reads one JSON value from the body into v. Unknown members are refused, so that a
// misspelt field is reported rather than silently ignored. Failures are invalid_body errors
// whose issues point at the offending member, or payload_too_large past the body limit.
func Decode(r *http.Request, v any) error {
	raw, err := io.ReadAll(r.Body)
	var maxErr *http.MaxBytesError
	if errors.As(err, &maxErr) {
		return errs.Newf(errs.PayloadTooLarge, "request body is larger than %d bytes", maxErr.Limit)
	}
	if err != nil {
		return invalidBody("", "body could not be read")
	}
	return DecodeBytes(raw, v)
}

// DecodeBytes is Decode for a body already read.
func DecodeBytes(raw []byte, v any) error {
	dec := json.NewDecoder(bytes.NewReader(raw))
	dec.DisallowUnknownFields()
	err := dec.Decode(v)
	if err == nil {
		if _, extra := dec.Token(); extra != io.EOF {
			return invalidBody("", "body must hold exactly one JSON value")
		}
		return nil
	}
	var (
		syntaxErr *json.SyntaxError
		typeErr   *json.UnmarshalTypeError
	)
	switch {
	case errors.Is(err, io.EOF):
		return invalidBody("", "body is empty; send a JSON object")
	case errors.As(err, &syntaxErr), errors.Is(err, io.ErrUnexpectedEOF):
		return invalidBody("", "body is not valid JSON")
	case errors.As(err, &typeErr):
		return invalidBody(pointerAt(raw, typeErr.Offset), fmt.Sprintf("must be %s, not %s", jsonKind(typeErr.Type.Kind().String()), typeErr.Value))
	case strings.HasPrefix(err.Error(), "json: unknown field "):
		name := strings.Trim(strings.TrimPrefix(err.Error(), "json: unknown field "), `"`)
		return invalidBody(wire.Pointer(name), "unknown member "+name)
	default:
		return invalidBody("", "body could not be read as JSON")
	}
}

func invalidBody(path, msg string) *errs.Error {
	return errs.New(errs.InvalidBody, nil).WithMessage(msg).
		With("issues", []wire.Issue{{Path: path, Message: msg}})
}

// InvalidBody builds the invalid_body error for a set of issues found by a handler.
func InvalidBody(issues ...wire.Issue) *errs.Error {
	msg := "request body is invalid"
	if len(issues) > 0 {
		msg = issues[0].Message
	}
	return errs.New(errs.InvalidBody, nil).WithMessage(msg).With("issues", issues)
}

// pointerAt returns the JSON Pointer of the value that ends at offset in raw: the decoder's
// own field path leaves out array indexes, which a client needs to find the bad element.
func pointerAt(raw []byte, offset int64) string {
	var stack []pathFrame
	path := func() string {
		tokens := make([]any, len(stack))
		for i, f := range stack {
			if f.array {
				tokens[i] = f.index
			} else {
				tokens[i] = f.key
			}
		}
		return wire.Pointer(tokens...)
	}
	dec := json.NewDecoder(bytes.NewReader(raw))
	best := ""
	expectKey := false
	for {
		tok, err := dec.Token()
		if err != nil || dec.InputOffset() > offset {
			return best
		}
		top := len(stack) - 1
		if top >= 0 && !stack[top].array && expectKey {
			if k, ok := tok.(string); ok {
				stack[top].key = k
				expectKey = false
				continue
			}
		}
		// tok starts (or is) a value at the current path.
		switch tok {
		case json.Delim('}'), json.Delim(']'):
			stack = stack[:top]
			expectKey = len(stack) > 0 && !stack[len(stack)-1].array
			advance(stack)
			continue
		}
		best = path()
		switch tok {
		case json.Delim('{'):
			stack = append(stack, pathFrame{})
			expectKey = true
		case json.Delim('['):
			stack = append(stack, pathFrame{array: true})
		default:
			expectKey = top >= 0 && !stack[top].array
			advance(stack)
		}
	}
}

// pathFrame is one open object or array while walking a body.
type pathFrame struct {
	array bool
	index int
	key   string
}

// advance moves an enclosing array on to its next element after a value ends.
func advance(stack []pathFrame) {
	if n := len(stack); n > 0 && stack[n-1].array {
		stack[n-1].index++
	}
}

func jsonKind(goKind string) string {
	switch goKind {
	case "string":
		return "a string"
	case "bool":
		return "a boolean"
	case "slice", "array":
		return "an array"
	case "map", "struct":
		return "an object"
	default:
		return "a number"
	}
}
