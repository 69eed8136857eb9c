package wire

import (
	"crypto/rand"
	"encoding/binary"
	"strings"
	"sync"
	"time"

	"github.com/oklog/ulid/v2"
)

// Prefix names the kind of an id; it is written before the time-ordered part.
type Prefix string

// The id prefixes of the public API.
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
// ids made in one process within the same millisecond still sort in creation order, and no id
// tells anything about another one beyond its time (see idSource).
func NewID(p Prefix) string {
	return string(p) + "_" + strings.ToLower(ids.next(time.Now()).String())
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

// ids is the process's id source. It is state, not configuration: the order of ids made in one
// millisecond needs a counter shared by every caller, as ulid.Make's own source was.
//
//nolint:gochecknoglobals // one counter per process, like ulid's default entropy it replaces
var ids idSource

// seqStartBits bounds where a millisecond's counter starts: below 2^15, so at least 2^15 ids
// fit in a millisecond before the source borrows the next one.
const seqStartBits = 15

// idSource makes ULIDs whose 80 bits after the 48-bit millisecond time are a 16-bit counter
// followed by 64 bits read from crypto/rand for every id.
//
// ulid.Make, used before, draws its entropy from math/rand seeded with the start time and,
// within a millisecond, makes the next id by adding less than 2^32 to the previous one: anyone
// holding an id could guess its neighbours (an invitation, a run of another organization).
// Here each id carries 64 fresh bits from crypto/rand, so one id tells nothing about another
// beyond its time, while the counter keeps ids of one millisecond in the order they were made
// (lists and tests sort by id). The counter starts each millisecond at a random value below
// 2^15, so it does not tell how busy the process is; when it would wrap, the source moves to
// the next millisecond, as a clock that went back also does not reorder ids.
type idSource struct {
	mu  sync.Mutex
	ms  uint64 // the millisecond of the last id
	seq uint16 // the counter of the last id
}

func (s *idSource) next(now time.Time) ulid.ULID {
	var r [10]byte
	_, _ = rand.Read(r[:]) // crypto/rand never fails on supported platforms

	ms := ulid.Timestamp(now)
	s.mu.Lock()
	switch {
	case ms > s.ms:
		s.ms, s.seq = ms, binary.BigEndian.Uint16(r[8:])>>(16-seqStartBits)
	case s.seq == 1<<16-1:
		s.ms, s.seq = s.ms+1, binary.BigEndian.Uint16(r[8:])>>(16-seqStartBits)
	default:
		s.seq++
	}
	ms, seq := s.ms, s.seq
	s.mu.Unlock()

	var id ulid.ULID
	_ = id.SetTime(ms) // a time before the year 10889
	binary.BigEndian.PutUint16(id[6:8], seq)
	copy(id[8:], r[:8])
	return id
}
