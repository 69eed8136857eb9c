package web

import (
	"reflect"
	"strings"

	"svc.dev/libs/wire"
)

// suggestMember names the member of the object v decodes into that an unknown member most
// likely meant, or "": a member named in some field's `aka` struct tag (comma-separated: what
// other tools call it, e.g. aka:"inputs,params" on input), or else wire.Nearest's choice (the
// same name but for case and separators, as idempotency_key for idempotencyKey, or the one
// name a couple of edits away). Only members of the top-level object are considered.
func suggestMember(v any, unknown string) string {
	t := reflect.TypeOf(v)
	for t != nil && t.Kind() == reflect.Pointer {
		t = t.Elem()
	}
	if t == nil || t.Kind() != reflect.Struct {
		return ""
	}
	type member struct {
		name string
		aka  []string
	}
	var members []member
	for i := range t.NumField() {
		f := t.Field(i)
		name, _, _ := strings.Cut(f.Tag.Get("json"), ",")
		if !f.IsExported() || name == "-" {
			continue
		}
		if name == "" {
			name = f.Name
		}
		m := member{name: name}
		if aka := f.Tag.Get("aka"); aka != "" {
			m.aka = strings.Split(aka, ",")
		}
		members = append(members, m)
	}
	for _, m := range members {
		for _, a := range m.aka {
			if wire.SameName(a, unknown) {
				return m.name
			}
		}
	}
	names := make([]string, len(members))
	for i, m := range members {
		names[i] = m.name
	}
	return wire.Nearest(unknown, names)
}
