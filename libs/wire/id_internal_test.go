package wire

import (
	"testing"
	"time"

	"github.com/oklog/ulid/v2"
	"github.com/stretchr/testify/require"
)

// TestIDSourceKeepsOrder covers the cases that fast calls rarely reach: a millisecond whose
// counter is used up, and a clock that goes back. Either way the next id sorts after the last
// one, even after the largest id the last state could have made.
func TestIDSourceKeepsOrder(t *testing.T) {
	t.Parallel()

	at := time.UnixMilli(1_800_000_000_000)
	ms := uint64(at.UnixMilli())
	for _, tc := range []struct {
		name   string
		seq    uint16
		now    time.Time
		wantMS uint64
	}{
		{"SameMillisecondCountsOn", 7, at, ms},
		{"CounterUsedUpBorrowsTheNextMillisecond", 1<<16 - 1, at, ms + 1},
		{"ClockWentBackStaysOnTheLastMillisecond", 7, at.Add(-time.Second), ms},
		{"NewMillisecondStartsTheCounterLow", 1<<16 - 1, at.Add(time.Millisecond), ms + 1},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			s := &idSource{ms: ms, seq: tc.seq}
			var last ulid.ULID // the largest id the state can have made
			require.NoError(t, last.SetTime(ms))
			last[6], last[7] = byte(tc.seq>>8), byte(tc.seq)
			for i := 8; i < len(last); i++ {
				last[i] = 0xff
			}

			got := s.next(tc.now)
			require.Equal(t, tc.wantMS, got.Time())
			require.Positive(t, got.Compare(last))
			if got.Time() != ms {
				require.Less(t, s.seq, uint16(1<<seqStartBits), "a new millisecond's counter starts below 2^15")
			}
		})
	}
}
