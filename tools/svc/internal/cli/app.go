// Package cli builds the svc command tree (README.md describes each command) from
// explicit dependencies — standard streams, environment lookup, clock, HTTP client — so tests
// can drive every command without touching the process's globals.
package cli

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net/http"
	"strings"
	"time"

	"github.com/spf13/cobra"

	api "svc.dev/clients/apiclient"
	"svc.dev/tools/svc/internal/credential"
)

// DefaultAPI is the built-in API address.
const DefaultAPI = "http://localhost:8080"

// Environment variables the CLI reads.
const (
	EnvAPI    = "SVC_API"
	EnvAPIKey = "SVC_API_KEY"
)

// Exit codes (README.md, Global behaviour).
const (
	ExitOK          = 0
	ExitFailure     = 1
	ExitUsage       = 2
	ExitInterrupted = 130
)

// Env is everything the commands take from the process.
type Env struct {
	Stdin  io.Reader
	Stdout io.Writer
	Stderr io.Writer
	// StdinIsTerminal enables prompts; StdoutIsTerminal picks tables over JSON.
	StdinIsTerminal  bool
	StdoutIsTerminal bool
	// ReadPassword reads one line from the terminal without echoing it; when ctx ends first
	// (Ctrl-C), it restores the terminal and returns ctx's error.
	ReadPassword func(ctx context.Context) ([]byte, error)
	Getenv       func(string) string
	HomeDir      func() (string, error)
	Hostname     func() (string, error)
	Now          func() time.Time
	// Sleep waits d or until ctx ends (follow loops poll with it).
	Sleep      func(ctx context.Context, d time.Duration) error
	HTTPClient *http.Client
	Version    string
}

func (e Env) validate() {
	switch {
	case e.Stdin == nil, e.Stdout == nil, e.Stderr == nil:
		panic("nil standard stream")
	case e.Getenv == nil, e.HomeDir == nil, e.Hostname == nil, e.Now == nil, e.Sleep == nil:
		panic("nil environment function")
	case e.HTTPClient == nil:
		panic("nil http client")
	case e.StdinIsTerminal && e.ReadPassword == nil:
		panic("nil ReadPassword with a terminal on stdin")
	}
}

// UsageError is a command line that cannot run: exit code 2.
type UsageError struct {
	Msg string
	// Cmd is the command whose --help the message points to.
	Cmd *cobra.Command
}

func (e *UsageError) Error() string { return e.Msg }

func usagef(cmd *cobra.Command, format string, args ...any) error {
	return &UsageError{Msg: fmt.Sprintf(format, args...), Cmd: cmd}
}

// ExitError ends the process with Code after printing Msg (when not empty): a run that did
// not complete, for example.
type ExitError struct {
	Code int
	Msg  string
}

func (e *ExitError) Error() string { return e.Msg }

// app holds the dependencies and the global flags of one invocation.
type app struct {
	env    Env
	apiArg string
	output string
	// entered is set when a command's own code starts: an error before it came from cobra's
	// parsing (unknown flag, bad arguments), which is a usage error.
	entered bool
	store   *credential.Store
}

// Run executes the command line args and returns the exit code.
func Run(ctx context.Context, env Env, args []string) int {
	env.validate()
	a := &app{env: env}
	root := a.rootCommand()
	root.SetArgs(args)
	cmd, err := root.ExecuteContextC(ctx)
	if err == nil {
		return ExitOK
	}
	return a.report(ctx, cmd, err)
}

// report prints err and picks the exit code.
func (a *app) report(ctx context.Context, cmd *cobra.Command, err error) int {
	w := a.env.Stderr
	var (
		usage  *UsageError
		exit   *ExitError
		apiErr *api.Error
	)
	switch {
	case errors.As(err, &usage) || !a.entered:
		c := cmd
		if usage != nil && usage.Cmd != nil {
			c = usage.Cmd
		}
		fmt.Fprintf(w, "svc: %s\n", err)
		if c != nil {
			fmt.Fprintf(w, "Run '%s --help' for usage.\n", c.CommandPath())
		}
		return ExitUsage
	case errors.As(err, &exit):
		if exit.Msg != "" {
			fmt.Fprintf(w, "svc: %s\n", exit.Msg)
		}
		return exit.Code
	case ctx.Err() != nil && errors.Is(err, ctx.Err()):
		fmt.Fprintln(w, "svc: interrupted")
		return ExitInterrupted
	case errors.As(err, &apiErr):
		fmt.Fprintf(w, "svc: %s (HTTP %d)\n", apiErr, apiErr.Status)
		for _, is := range apiErr.Issues {
			fmt.Fprintf(w, "  %s: %s\n", cmp(is.Path, "/"), is.Message)
		}
		if hint := errorHint(apiErr); hint != "" {
			fmt.Fprintf(w, "%s\n", hint)
		}
		return ExitFailure
	default:
		fmt.Fprintf(w, "svc: %s\n", err)
		return ExitFailure
	}
}

func cmp(s, fallback string) string {
	if s == "" {
		return fallback
	}
	return s
}

// errorHint tells the caller what to do about the codes a CLI user meets most.
func errorHint(e *api.Error) string {
	switch e.Code {
	case "unauthorized", "UNAUTHORIZED", "INVALID_TOKEN":
		return "The API key or session is missing, revoked or for another API: run 'svc login' (or check SVC_API_KEY)."
	case "version_mismatch":
		return fmt.Sprintf("The workflow is at version %d now: read it again ('svc workflows get') and retry.", e.Current)
	case "rate_limited", "RATE_LIMITED":
		return fmt.Sprintf("Rate limited: retry in %s.", e.RetryAfter.Round(time.Millisecond))
	case "INVALID_ORIGIN", "MISSING_OR_NULL_ORIGIN":
		return "The API does not trust its own address as an origin: its SVC_PUBLIC_URL (or SVC_TRUSTED_ORIGINS) must name the URL given to --api."
	case "no_active_organization":
		return "The session has no active organization: run 'svc login' again."
	}
	return ""
}

// run wraps a command's body so that report can tell parse errors from the command's own.
func (a *app) run(f func(cmd *cobra.Command, args []string) error) func(*cobra.Command, []string) error {
	return func(cmd *cobra.Command, args []string) error {
		a.entered = true
		return f(cmd, args)
	}
}

func (a *app) rootCommand() *cobra.Command {
	root := &cobra.Command{
		Use:   "svc",
		Short: "Command-line client of the workflow control plane",
		Long: `svc signs you in to a workflow control plane, keeps its credentials, and drives
workflows, runs and schedules from the shell.

Output is a table on a terminal and JSON otherwise (override with --output).
The API is --api, else $SVC_API, else the API of the last login, else ` + DefaultAPI + `.`,
		Version:       cmp(a.env.Version, "dev"),
		SilenceErrors: true,
		SilenceUsage:  true,
		Args:          cobra.ArbitraryArgs,
		RunE: a.run(func(cmd *cobra.Command, args []string) error {
			if len(args) == 0 {
				return cmd.Help()
			}
			return unknownCommand(cmd, args[0])
		}),
	}
	root.SetIn(a.env.Stdin)
	root.SetOut(a.env.Stdout)
	root.SetErr(a.env.Stderr)
	root.SetVersionTemplate("svc {{.Version}}\n")
	root.SetFlagErrorFunc(func(c *cobra.Command, err error) error { return &UsageError{Msg: err.Error(), Cmd: c} })
	root.CompletionOptions.DisableDefaultCmd = true
	root.PersistentFlags().StringVar(&a.apiArg, "api", "", "API base URL (default: $SVC_API, else the last login's API, else "+DefaultAPI+")")
	root.PersistentFlags().StringVarP(&a.output, "output", "o", "auto", "output format: auto (table on a terminal, JSON otherwise), json or table")
	_ = root.RegisterFlagCompletionFunc("output", cobra.FixedCompletions([]string{"auto", "json", "table"}, cobra.ShellCompDirectiveNoFileComp))
	root.PersistentPreRunE = func(cmd *cobra.Command, _ []string) error {
		switch a.output {
		case "auto", "json", "table":
			return nil
		}
		return usagef(cmd, "invalid --output %q: want auto, json or table", a.output)
	}

	root.AddGroup(&cobra.Group{ID: "auth", Title: "Account and credentials:"}, &cobra.Group{ID: "domain", Title: "Workflows, runs and schedules:"})
	for _, c := range []*cobra.Command{a.loginCommand(), a.logoutCommand(), a.tokenCommand(), a.envCommand(), a.whoamiCommand(), a.keyCommand()} {
		c.GroupID = "auth"
		root.AddCommand(c)
	}
	for _, c := range []*cobra.Command{a.workflowsCommand(), a.opsCommand(), a.runCommand(), a.runsCommand(), a.schedulesCommand(), a.connectorsCommand(), a.retentionCommand()} {
		c.GroupID = "domain"
		root.AddCommand(c)
	}
	root.AddCommand(a.mcpCommand())
	root.AddCommand(a.completionCommand(root))
	return root
}

// group is a command that only holds subcommands: without one, or with an unknown one, it
// is a usage error (cobra would print help and exit 0).
func (a *app) group(use, short string, aliases []string, subs ...*cobra.Command) *cobra.Command {
	g := &cobra.Command{
		Use:     use,
		Short:   short,
		Aliases: aliases,
		Args:    cobra.ArbitraryArgs,
		RunE: a.run(func(cmd *cobra.Command, args []string) error {
			if len(args) == 0 {
				names := make([]string, 0, len(cmd.Commands()))
				for _, c := range cmd.Commands() {
					if c.IsAvailableCommand() {
						names = append(names, c.Name())
					}
				}
				return usagef(cmd, "%s needs a command: %s", cmd.CommandPath(), strings.Join(names, ", "))
			}
			return unknownCommand(cmd, args[0])
		}),
	}
	g.AddCommand(subs...)
	return g
}

func unknownCommand(cmd *cobra.Command, name string) error {
	msg := fmt.Sprintf("unknown command %q for %q", name, cmd.CommandPath())
	if cmd.SuggestionsMinimumDistance <= 0 {
		cmd.SuggestionsMinimumDistance = 2 // cobra's default, which SuggestionsFor does not apply
	}
	if s := cmd.SuggestionsFor(name); len(s) > 0 {
		msg += "; did you mean " + strings.Join(s, " or ") + "?"
	}
	return usagef(cmd, "%s", msg)
}

// args checks positional arguments: exactly the named ones.
func args(names ...string) cobra.PositionalArgs {
	return func(cmd *cobra.Command, got []string) error {
		if len(got) < len(names) {
			return usagef(cmd, "missing argument <%s>", names[len(got)])
		}
		if len(got) > len(names) {
			return usagef(cmd, "unexpected argument %q", got[len(names)])
		}
		for i, g := range got {
			if strings.TrimSpace(g) == "" {
				return usagef(cmd, "argument <%s> is empty", names[i])
			}
		}
		return nil
	}
}

// ---------------------------------------------------------------------------------------
// Shared pieces: the API address, the credentials, the client, the output format.

func (a *app) credentials() (*credential.Store, error) {
	if a.store != nil {
		return a.store, nil
	}
	p, err := credential.DefaultPath(a.env.Getenv, a.env.HomeDir)
	if err != nil {
		return nil, err
	}
	a.store = credential.NewStore(p)
	return a.store, nil
}

// apiURL resolves the API: --api, then $SVC_API, then the last login's API, then the
// built-in address. The result is normalized, as the credentials file keys it.
func (a *app) apiURL(cmd *cobra.Command) (string, error) {
	raw := a.apiArg
	from := "--api"
	if raw == "" {
		raw, from = a.env.Getenv(EnvAPI), EnvAPI
	}
	if raw == "" {
		store, err := a.credentials()
		if err != nil {
			return "", err
		}
		f, err := store.Load()
		if err != nil {
			return "", err
		}
		raw, from = f.Default, "credentials default"
	}
	if raw == "" {
		raw, from = DefaultAPI, "default"
	}
	u, err := api.NormalizeURL(raw)
	if err != nil {
		if from == "--api" {
			return "", usagef(cmd, "invalid --api: %v", err)
		}
		return "", fmt.Errorf("%s: %w", from, err)
	}
	return u, nil
}

func (a *app) client(apiURL string) (*api.Client, error) {
	return api.NewClient(apiURL, a.env.HTTPClient, "svc-cli/"+cmp(a.env.Version, "dev"))
}

// session is the stored login for apiURL.
func (a *app) session(apiURL string) (credential.Session, error) {
	store, err := a.credentials()
	if err != nil {
		return credential.Session{}, err
	}
	s, ok, err := store.Get(apiURL)
	if err != nil {
		return credential.Session{}, err
	}
	if !ok {
		return credential.Session{}, &ExitError{Code: ExitFailure, Msg: fmt.Sprintf("not logged in to %s: run 'svc login --api %s'", apiURL, apiURL)}
	}
	return s, nil
}

// domain is what every domain command needs: the client and the API key ($SVC_API_KEY, else
// the stored one).
func (a *app) domain(cmd *cobra.Command) (*api.Client, string, error) {
	u, err := a.apiURL(cmd)
	if err != nil {
		return nil, "", err
	}
	c, err := a.client(u)
	if err != nil {
		return nil, "", err
	}
	if k := a.env.Getenv(EnvAPIKey); k != "" {
		return c, k, nil
	}
	s, err := a.session(u)
	if err != nil {
		var exit *ExitError
		if errors.As(err, &exit) {
			exit.Msg += " (or set " + EnvAPIKey + ")"
		}
		return nil, "", err
	}
	return c, s.APIKey, nil
}

// jsonOutput reports whether output is JSON: --output, else JSON unless stdout is a terminal.
func (a *app) jsonOutput() bool {
	switch a.output {
	case "json":
		return true
	case "table":
		return false
	}
	return !a.env.StdoutIsTerminal
}

func (a *app) out() io.Writer { return a.env.Stdout }
