package main

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"os/exec"
	"sync"
	"sync/atomic"
	"syscall"
	"time"
)

// procSpec says how to start one child process.
type procSpec struct {
	name       string
	path       string
	args       []string
	env        []string // nil means devstack's own environment
	dir        string
	credential *syscall.Credential // set to run as another user (Postgres refuses root)
	stopSignal syscall.Signal      // what asks it to stop; SIGTERM when zero
}

// process is one running child. Its exit is expected only after stop or expectExit; any other
// exit is a failure the supervisor reports.
type process struct {
	spec     procSpec
	cmd      *exec.Cmd
	out      *lineWriter
	stopping atomic.Bool
	done     chan struct{}
	err      error // why it exited; read only after done is closed
}

// Done is closed when the process has exited and its output is flushed.
func (p *process) Done() <-chan struct{} { return p.done }

// Err is the exit error (nil for exit status 0); valid once Done is closed.
func (p *process) Err() error { return p.err }

// expectExit marks an exit that something else (pg_ctl stop) is about to cause, so it is not
// reported as a crash.
func (p *process) expectExit() { p.stopping.Store(true) }

// stop asks the process to stop with its stop signal and waits until ctx ends, then kills it.
// The signal goes to its whole process group so that a shell wrapper or a worker it forked
// stops with it.
func (p *process) stop(ctx context.Context) error {
	p.expectExit()
	select {
	case <-p.done:
		return nil
	default:
	}
	sig := p.spec.stopSignal
	if sig == 0 {
		sig = syscall.SIGTERM
	}
	_ = syscall.Kill(-p.cmd.Process.Pid, sig) // ESRCH: it is already gone, which is what we want
	select {
	case <-p.done:
		return nil
	case <-ctx.Done():
	}
	_ = syscall.Kill(-p.cmd.Process.Pid, syscall.SIGKILL)
	<-p.done
	return fmt.Errorf("%s did not stop in time and was killed", p.spec.name)
}

// supervisor starts children, prefixes their output, and reports the first one that exits on its
// own: with one service down the system is not the system any more, so devstack stops it all.
type supervisor struct {
	log   *slog.Logger
	out   io.Writer // shared by every child; must be safe for concurrent use
	width int       // width of the name column

	failOnce sync.Once
	failed   chan struct{}
	failure  error
}

func newSupervisor(log *slog.Logger, out io.Writer, width int) *supervisor {
	if log == nil {
		panic("nil log")
	}
	if out == nil {
		panic("nil out")
	}
	return &supervisor{log: log, out: out, width: width, failed: make(chan struct{})}
}

// Failed is closed when a child has exited without being asked to.
func (s *supervisor) Failed() <-chan struct{} { return s.failed }

// Err says which child failed and how; nil until Failed is closed.
func (s *supervisor) Err() error {
	select {
	case <-s.failed:
		return s.failure
	default:
		return nil
	}
}

func (s *supervisor) fail(err error) {
	s.failOnce.Do(func() {
		s.failure = err
		close(s.failed)
	})
}

// start runs spec as a child of devstack.
func (s *supervisor) start(spec procSpec) (*process, error) {
	out := newLineWriter(fmt.Sprintf("%-*s | ", s.width, spec.name), s.out)
	cmd := exec.Command(spec.path, spec.args...)
	cmd.Env = spec.env
	cmd.Dir = spec.dir
	// One writer for both streams makes exec share one pipe, so a child's stdout and stderr
	// lines stay in the order it wrote them.
	cmd.Stdout = out
	cmd.Stderr = out
	cmd.SysProcAttr = &syscall.SysProcAttr{
		// Its own process group keeps the terminal's Ctrl-C away from the children: devstack
		// stops them itself, in order (gateway, backends, then Postgres and Redis).
		Setpgid: true,
		// If devstack dies without cleaning up (SIGKILL), the kernel still stops its children
		// instead of leaving them holding the ports for the next run. Go keeps its OS threads
		// alive, so the "parent thread died" caveat of PR_SET_PDEATHSIG does not bite here.
		Pdeathsig:  syscall.SIGTERM,
		Credential: spec.credential,
	}
	// A grandchild that keeps the output pipe open must not keep Wait from returning.
	cmd.WaitDelay = 2 * time.Second
	if err := cmd.Start(); err != nil {
		return nil, fmt.Errorf("start %s: %w", spec.name, err)
	}
	p := &process{spec: spec, cmd: cmd, out: out, done: make(chan struct{})}
	s.log.Debug("started", "name", spec.name, "pid", cmd.Process.Pid)
	go func() {
		err := cmd.Wait()
		out.Flush()
		p.err = err
		close(p.done)
		if p.stopping.Load() {
			s.log.Debug("stopped", "name", spec.name, "err", err)
			return
		}
		if err == nil {
			err = errors.New("exit status 0")
		}
		s.log.Error("child exited unexpectedly", "name", spec.name, "err", err)
		s.fail(fmt.Errorf("%s exited unexpectedly: %w", spec.name, err))
	}()
	return p, nil
}

// stopAll stops the processes at once and waits for all of them, each killed when ctx ends.
// Callers stop one tier at a time (gateway, then backends) so requests drain front to back.
func stopAll(ctx context.Context, procs []*process) error {
	errs := make([]error, len(procs))
	var wg sync.WaitGroup
	for i, p := range procs {
		wg.Go(func() { errs[i] = p.stop(ctx) })
	}
	wg.Wait()
	return errors.Join(errs...)
}

// lockedWriter serializes whole lines from many children and devstack's own messages onto one
// stream so they never interleave mid-line.
type lockedWriter struct {
	mu sync.Mutex
	w  io.Writer
}

func (w *lockedWriter) Write(p []byte) (int, error) {
	w.mu.Lock()
	defer w.mu.Unlock()
	return w.w.Write(p)
}

// maxLine bounds how much of an unterminated line is held back, so a child printing a huge
// line (or binary junk) cannot grow devstack's memory without limit.
const maxLine = 64 << 10

// lineWriter prefixes every line a child writes with its name.
type lineWriter struct {
	prefix string
	out    io.Writer

	mu  sync.Mutex
	buf []byte
}

func newLineWriter(prefix string, out io.Writer) *lineWriter {
	return &lineWriter{prefix: prefix, out: out}
}

func (w *lineWriter) Write(p []byte) (int, error) {
	w.mu.Lock()
	defer w.mu.Unlock()
	w.buf = append(w.buf, p...)
	for {
		i := bytes.IndexByte(w.buf, '\n')
		if i < 0 {
			break
		}
		if err := w.emit(w.buf[:i]); err != nil {
			return 0, err
		}
		w.buf = w.buf[i+1:]
	}
	if len(w.buf) >= maxLine {
		if err := w.emit(w.buf); err != nil {
			return 0, err
		}
		w.buf = w.buf[:0]
	}
	return len(p), nil
}

// Flush writes a last line that had no newline.
func (w *lineWriter) Flush() {
	w.mu.Lock()
	defer w.mu.Unlock()
	if len(w.buf) > 0 {
		_ = w.emit(w.buf)
		w.buf = w.buf[:0]
	}
}

func (w *lineWriter) emit(line []byte) error {
	line = bytes.TrimSuffix(line, []byte("\r"))
	b := make([]byte, 0, len(w.prefix)+len(line)+1)
	b = append(b, w.prefix...)
	b = append(b, line...)
	b = append(b, '\n')
	_, err := w.out.Write(b)
	return err
}
