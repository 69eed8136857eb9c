// Command svc is the command-line client of the workflow control plane: login and
// credentials, API keys, workflows, runs and schedules. See README.md.
package main

import (
	"context"
	"net/http"
	"os"
	"os/signal"
	"syscall"
	"time"

	"golang.org/x/term"

	"svc.dev/clients/apiclient"
	"svc.dev/libs/buildinfo"
	"svc.dev/tools/svc/internal/cli"
)

func main() {
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	code := cli.Run(ctx, cli.Env{
		Stdin:            os.Stdin,
		Stdout:           os.Stdout,
		Stderr:           os.Stderr,
		StdinIsTerminal:  term.IsTerminal(int(os.Stdin.Fd())),
		StdoutIsTerminal: term.IsTerminal(int(os.Stdout.Fd())),
		ReadPassword:     readPassword,
		Getenv:           os.Getenv,
		HomeDir:          os.UserHomeDir,
		Hostname:         os.Hostname,
		Now:              time.Now,
		Sleep:            apiclient.Sleep,
		HTTPClient:       &http.Client{Timeout: 60 * time.Second},
		Version:          buildinfo.Version(),
	}, os.Args[1:])
	stop()
	os.Exit(code)
}

// readPassword reads a line from the terminal on stdin without echo. The read runs aside so
// that Ctrl-C (ctx) can end it; the terminal is then restored, since term.ReadPassword's own
// restore would never run.
func readPassword(ctx context.Context) ([]byte, error) {
	fd := int(os.Stdin.Fd())
	state, err := term.GetState(fd)
	if err != nil {
		return nil, err
	}
	type read struct {
		b   []byte
		err error
	}
	ch := make(chan read, 1)
	go func() {
		b, err := term.ReadPassword(fd)
		ch <- read{b, err}
	}()
	select {
	case r := <-ch:
		return r.b, r.err
	case <-ctx.Done():
		_ = term.Restore(fd, state)
		return nil, ctx.Err()
	}
}
