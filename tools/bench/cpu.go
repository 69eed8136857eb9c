package main

import (
	"cmp"
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"time"
)

// CPU per operation, by process, read from /proc. At the start and at the end of a measured
// window (never the warm-up) bench reads utime + stime (fields 14 and 15 of /proc/<pid>/stat,
// in clock ticks, every thread of the process included) of:
//   - each service of the system bench started (gateway, identity, workflow-editor,
//     run-orchestrator, scheduler, webhook-ingress), found among bench's own descendants by
//     executable name, as waiting-rss finds the orchestrator (none with -no-system);
//   - every process named postgres and redis-server on the machine: the Postgres and Redis are
//     shared, so whatever else uses them during the window counts too;
//   - bench itself (the load generator, and the snapshots: each reads every /proc/<pid>/stat).
//
// A process that started during the window counts with all its CPU; one that ended during it
// (a Postgres backend whose connection closed) is lost, and the line says how many were. The
// clock tick is read once with `getconf CLK_TCK` (100 on Linux wherever checked); each value
// has that resolution per process, so a window's total is good to about ±10 ms per process.

// serviceNames are the executables of the system's services.
func serviceNames() []string {
	return []string{"gateway", "identity", "workflow-editor", "run-orchestrator", "scheduler", "webhook-ingress"}
}

// procStat is what bench reads out of one /proc/<pid>/stat line.
type procStat struct {
	pid   int
	comm  string
	ppid  int
	ticks int64 // utime + stime, clock ticks
	start int64 // starttime (field 22), clock ticks after boot: tells a reused pid apart
}

// parseProcStat reads "pid (comm) state ppid … utime stime … starttime …". comm may hold
// spaces and parentheses, so it runs to the last ')' and the fields are counted from there:
// state is field 3, so field k is fields[k-3].
func parseProcStat(line string) (procStat, bool) {
	open := strings.IndexByte(line, '(')
	end := strings.LastIndexByte(line, ')')
	if open < 0 || end < open {
		return procStat{}, false
	}
	pid, err := strconv.Atoi(strings.TrimSpace(line[:open]))
	if err != nil {
		return procStat{}, false
	}
	f := strings.Fields(line[end+1:])
	if len(f) < 22-2 {
		return procStat{}, false
	}
	ppid, err1 := strconv.Atoi(f[4-3])
	utime, err2 := strconv.ParseInt(f[14-3], 10, 64)
	stime, err3 := strconv.ParseInt(f[15-3], 10, 64)
	start, err4 := strconv.ParseInt(f[22-3], 10, 64)
	if err1 != nil || err2 != nil || err3 != nil || err4 != nil {
		return procStat{}, false
	}
	return procStat{pid: pid, comm: line[open+1 : end], ppid: ppid, ticks: utime + stime, start: start}, true
}

// procKey names one process across snapshots: a pid reused by a later process is another one.
type procKey struct {
	pid   int
	start int64
}

// cpuSnapshot is the CPU so far of every measured process at one moment, and the group each
// belongs to ("postgres", "run-orchestrator", "bench").
type cpuSnapshot struct {
	at    time.Time
	ticks map[procKey]int64
	group map[procKey]string
}

// groupOf says which group a process is measured in, "" for none. services holds bench's
// descendants that are services, by pid.
func groupOf(p procStat, self int, services map[int]string) string {
	switch {
	case p.pid == self:
		return "bench"
	case p.comm == "postgres":
		return "postgres"
	case p.comm == "redis-server":
		return "redis-server"
	default:
		return services[p.pid]
	}
}

// cpuMeter takes snapshots. Its zero value is not ready; a nil *cpuMeter measures nothing.
type cpuMeter struct {
	self int     // bench's pid
	hz   float64 // clock ticks per second
}

// newCPUMeter reads the clock tick rate once; 100 when getconf cannot say.
func newCPUMeter(ctx context.Context) *cpuMeter {
	hz := 100.0
	if out, err := exec.CommandContext(ctx, "getconf", "CLK_TCK").Output(); err == nil {
		if v, err := strconv.ParseFloat(strings.TrimSpace(string(out)), 64); err == nil && v > 0 {
			hz = v
		}
	}
	return &cpuMeter{self: os.Getpid(), hz: hz}
}

// snapshot reads every /proc/<pid>/stat once. Without /proc it is empty.
func (m *cpuMeter) snapshot() cpuSnapshot {
	paths, _ := filepath.Glob("/proc/[0-9]*/stat")
	stats := make([]procStat, 0, len(paths))
	parents := make(map[int]int, len(paths))
	for _, path := range paths {
		b, err := os.ReadFile(path)
		if err != nil {
			continue // it exited while we looked
		}
		if p, ok := parseProcStat(string(b)); ok {
			stats = append(stats, p)
			parents[p.pid] = p.ppid
		}
	}
	services := map[int]string{}
	for _, pid := range descendants(parents, m.self) {
		if name := exeName(pid); slices.Contains(serviceNames(), name) {
			services[pid] = name
		}
	}
	s := cpuSnapshot{at: time.Now(), ticks: map[procKey]int64{}, group: map[procKey]string{}}
	for _, p := range stats {
		if g := groupOf(p, m.self, services); g != "" {
			k := procKey{p.pid, p.start}
			s.ticks[k], s.group[k] = p.ticks, g
		}
	}
	return s
}

// cpuWindow is a measurement under way. A snapshot due at a moment is taken by a goroutine of
// its own then, so the load's schedule is never held up by it (one takes a few ms).
type cpuWindow struct {
	meter      *cpuMeter
	per        string
	begin, end chan cpuSnapshot // end is nil when the window ends at stop
}

// from starts a window at t (at once when t has passed) that ends at stop; per names one
// operation of the phase ("run", "request"). Nil on a nil meter.
func (m *cpuMeter) from(t time.Time, per string) *cpuWindow {
	if m == nil {
		return nil
	}
	return &cpuWindow{meter: m, per: per, begin: m.snapshotAt(t)}
}

// between is a window from t0 to t1, both taken on time whenever stop is called after t1.
func (m *cpuMeter) between(t0, t1 time.Time, per string) *cpuWindow {
	if m == nil {
		return nil
	}
	return &cpuWindow{meter: m, per: per, begin: m.snapshotAt(t0), end: m.snapshotAt(t1)}
}

func (m *cpuMeter) snapshotAt(t time.Time) chan cpuSnapshot {
	c := make(chan cpuSnapshot, 1)
	time.AfterFunc(time.Until(t), func() { c <- m.snapshot() })
	return c
}

// stop ends the window (now, or at its end when it has one, waiting for it) and returns what
// it measured; nil on a nil window. Call it once.
func (w *cpuWindow) stop() *cpuUse {
	if w == nil {
		return nil
	}
	var end cpuSnapshot
	if w.end != nil {
		end = <-w.end
	} else {
		end = w.meter.snapshot()
	}
	u := cpuDelta(<-w.begin, end, w.meter.hz)
	u.Per = w.per
	return u
}

// procCPU is one group's CPU over a window.
type procCPU struct {
	Name  string
	Procs int // processes seen in the window
	CPU   time.Duration
}

// cpuUse is the CPU of each group over one measured window.
type cpuUse struct {
	Per     string // one operation of the phase: "run", "request", …
	Window  time.Duration
	Groups  []procCPU // most CPU first
	Started int       // processes that started during the window (counted whole)
	Ended   int       // processes that ended during it (their CPU in the window is lost)
}

// Total is the CPU of every group.
func (u *cpuUse) Total() time.Duration {
	var t time.Duration
	for _, g := range u.Groups {
		t += g.CPU
	}
	return t
}

// cpuDelta groups what each process used between two snapshots.
func cpuDelta(begin, end cpuSnapshot, hz float64) *cpuUse {
	u := &cpuUse{Window: end.at.Sub(begin.at)}
	ticks := map[string]int64{}
	procs := map[string]int{}
	for k, t := range end.ticks {
		g := end.group[k]
		if t0, ok := begin.ticks[k]; ok {
			t -= t0
		} else {
			u.Started++
		}
		ticks[g] += max(t, 0)
		procs[g]++
	}
	for k, g := range begin.group {
		if _, ok := end.ticks[k]; !ok {
			u.Ended++
			if _, seen := procs[g]; !seen {
				ticks[g] = 0
			}
			procs[g]++
		}
	}
	for g, t := range ticks {
		u.Groups = append(u.Groups, procCPU{Name: g, Procs: procs[g], CPU: time.Duration(float64(t) / hz * float64(time.Second))})
	}
	slices.SortFunc(u.Groups, func(a, b procCPU) int {
		return cmp.Or(cmp.Compare(b.CPU, a.CPU), strings.Compare(a.Name, b.Name))
	})
	return u
}

// cpuLine is the report's line for a window in which ops operations completed:
// "cpu per run: postgres 2.81 ms, run-orchestrator 1.52, … total 5.60 ms (1990 runs; …)".
func cpuLine(u *cpuUse, ops int) string {
	per := cmp.Or(u.Per, "request")
	if ops <= 0 {
		return fmt.Sprintf("cpu per %s: not computed, no %s completed in the window (total %s ms over %.1f s)",
			per, per, msPer(u.Total(), 1), u.Window.Seconds())
	}
	parts := make([]string, 0, len(u.Groups)+1)
	for i, g := range u.Groups {
		v := msPer(g.CPU, ops)
		if i == 0 {
			v += " ms"
		}
		parts = append(parts, g.Name+" "+v)
	}
	parts = append(parts, "total "+msPer(u.Total(), ops)+" ms")
	line := fmt.Sprintf("cpu per %s: %s (%d %ss", per, strings.Join(parts, ", "), ops, per)
	if u.Window > 0 {
		line += fmt.Sprintf("; %.2f cores over %.1f s", u.Total().Seconds()/u.Window.Seconds(), u.Window.Seconds())
	}
	if u.Started > 0 {
		line += fmt.Sprintf("; %d processes started in the window (counted whole)", u.Started)
	}
	if u.Ended > 0 {
		line += fmt.Sprintf("; %d ended in it (their CPU in the window lost)", u.Ended)
	}
	return line + ")"
}

// msPer is d / n in milliseconds, two decimals.
func msPer(d time.Duration, n int) string {
	return strconv.FormatFloat(float64(d)/float64(time.Millisecond)/float64(n), 'f', 2, 64)
}

// cpuNote explains the CPU lines once, under the table.
const cpuNote = "CPU per operation by process: utime + stime from /proc/<pid>/stat at the start and end of each measured window (never the warm-up), divided by the phase's completed operations (n minus errors). Groups: the system's services (bench's descendants), every postgres and redis-server process of the machine (shared: anything else using them counts too), and bench itself. Resolution one clock tick (10 ms) per process; a process that ended inside the window is lost, one that started counts whole. CPU of work a phase's operations left after its window (runs still executing) is not in it, and work left by the warm-up is: at a steady rate the two even out."
