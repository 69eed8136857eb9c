package wire

import (
	"strings"

	"github.com/oklog/ulid/v2"
)

// Prefix names the kind of an id; it is written before the time-ordered part.
type Prefix string

// The id prefixes of contract §0.
const (
	User         Prefix = "usr"
	Organization Prefix = "org"
	Member       Prefix = "mem"
	APIKey       Prefix = "key"
	Session      Prefix = "ses"
	Workflow     Prefix = "wf"
	Run          Prefix = "run"
	Attempt      Prefix = "att"
	Signal       Prefix = "sig"
	Schedule     Prefix = "sch"
	Invitation   Prefix = "inv"
	Fire         Prefix = "fir"
)

// NewID returns prefix_ followed by a lowercase ULID: ids of one kind sort by creation time,
// and ids made in one process within the same millisecond still sort in creation order.
func NewID(p Prefix) string {
	return string(p) + "_" + strings.ToLower(ulid.Make().String())
}

// ValidID reports whether s is an id of kind p. It never consults storage; it only rejects
// strings that no id of that kind can be, so that they are answered 404 without a query.
func ValidID(p Prefix, s string) bool {
	rest, ok := strings.CutPrefix(s, string(p)+"_")
	if !ok || len(rest) != ulid.EncodedSize {
		return false
	}
	_, err := ulid.ParseStrict(strings.ToUpper(rest))
	return err == nil
}
