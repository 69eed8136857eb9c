package web

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"strings"

	"svc.dev/libs/wire"
	"svc.dev/proto/errs"
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
	if err := CheckJSON(raw); err != nil {
		return err
	}
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
		return invalidBody(wire.PointerAt(raw, typeErr.Offset), fmt.Sprintf("must be %s, not %s", jsonKind(typeErr.Type.Kind().String()), typeErr.Value))
	case strings.HasPrefix(err.Error(), "json: unknown field "):
		name := strings.Trim(strings.TrimPrefix(err.Error(), "json: unknown field "), `"`)
		issue := wire.Issue{Path: wire.Pointer(name), Message: "unknown member " + name}
		if meant := suggestMember(v, name); meant != "" {
			issue.DidYouMean = meant
			issue.Message += fmt.Sprintf("; did you mean %q?", meant)
		}
		return InvalidBody(issue)
	default:
		return invalidBody("", "body could not be read as JSON")
	}
}

// CheckJSON applies the JSON boundary's rules (wire.CheckJSON: UTF-8, nesting depth,
// duplicate members, numbers a 64-bit float holds) to a body or an embedded JSON value, as an
// invalid_body error pointing at the offending value.
func CheckJSON(raw []byte) *errs.Error {
	if e := wire.CheckJSON(raw); e != nil {
		return invalidBody(e.Pointer, e.Message)
	}
	return nil
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
