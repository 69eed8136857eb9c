package main

import (
	"fmt"
	"io"
	"sync"
	"time"
)

// slowLog lists the requests of measured windows that took longer than over, one line each
// with the time it was scheduled and how late the generator sent it (a stall of the
// generator's own, not the system's), so a tail can be set beside what else happened then (a
// Postgres log, a list of WAL segments, another process's samples).
type slowLog struct {
	mu   sync.Mutex
	w    io.Writer
	over time.Duration
}

// write appends the slow samples of one phase, labelled; a nil log writes nothing.
func (l *slowLog) write(label string, samples []sample) {
	if l == nil {
		return
	}
	l.mu.Lock()
	defer l.mu.Unlock()
	for _, s := range samples {
		if s.outcome == outcomeNone || s.latency <= l.over {
			continue
		}
		// A failed write loses a diagnostic line, never a figure: the report has its own file.
		_, _ = fmt.Fprintf(l.w, "%s %8.1f ms (sent %.1f ms late) %s\n", s.at.UTC().Format("15:04:05.000"),
			float64(s.latency.Microseconds())/1000, float64(s.late.Microseconds())/1000, label)
	}
}
