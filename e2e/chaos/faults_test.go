package chaos

import (
	"sync"
	"time"
)

// window is one injected fault: from the moment it began to the moment the system's part was
// back (process healthy again, server accepting, proxy listening).
type window struct {
	name       string
	start, end time.Time
}

// fault is one kind of fault: inject does it, holds it for hold and undoes it.
type fault struct {
	name   string
	inject func(hold time.Duration)
}

// faults lists every fault the suite injects, in the order of one pass.
func (s *stack) faults() []fault {
	var out []fault
	for _, role := range s.roles() {
		out = append(out, fault{name: "kill -9 " + role, inject: func(hold time.Duration) { s.killRestart(role, hold) }})
	}
	out = append(out,
		fault{name: "postgres restart", inject: func(time.Duration) { s.pg.Restart(s.t) }},
		fault{name: "redis FLUSHALL", inject: func(time.Duration) {
			if err := s.redis.FlushAll(); err != nil {
				s.t.Errorf("FLUSHALL: %v", err)
			}
		}},
		fault{name: "redis down", inject: func(hold time.Duration) {
			s.redis.Stop(s.t)
			time.Sleep(2 * hold) // holds the fault window open
			s.redis.Start(s.t)
		}},
	)
	for _, name := range []string{"gateway→run-orchestrator", "run-orchestrator-1→postgres", "gateway→identity",
		"scheduler→run-orchestrator", "webhook-ingress→run-orchestrator"} {
		p := s.cuts[name]
		out = append(out, fault{name: "cut " + name, inject: func(hold time.Duration) {
			p.Stop()
			time.Sleep(hold) // holds the fault window open
			p.Start()
		}})
	}
	return out
}

// faultLog records the windows.
type faultLog struct {
	mu      sync.Mutex
	windows []window
}

func (f *faultLog) run(ft fault, hold time.Duration) {
	w := window{name: ft.name, start: time.Now()}
	ft.inject(hold)
	w.end = time.Now()
	f.mu.Lock()
	f.windows = append(f.windows, w)
	f.mu.Unlock()
}

func (f *faultLog) all() []window {
	f.mu.Lock()
	defer f.mu.Unlock()
	return append([]window(nil), f.windows...)
}
