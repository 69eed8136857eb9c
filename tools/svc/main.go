// Command svc is the command-line client of the workflow control plane: login and
// credentials, API keys, workflows, runs and schedules (seed "Command-line client",
// contract §7). See README.md.
package main

import (
	"context"
	"net/http"
	"os"
	"os/signal"
	"syscall"
	"time"

	"golang.org/x/term"

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
		ReadPassword:     func() ([]byte, error) { return term.ReadPassword(int(os.Stdin.Fd())) },
		Getenv:           os.Getenv,
		HomeDir:          os.UserHomeDir,
		Hostname:         os.Hostname,
		Now:              time.Now,
		Sleep:            cli.Sleep,
		HTTPClient:       &http.Client{Timeout: 60 * time.Second},
		Version:          buildinfo.Version(),
	}, os.Args[1:])
	stop()
	os.Exit(code)
}
