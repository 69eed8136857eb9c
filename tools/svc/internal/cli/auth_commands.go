package cli

import (
	"bufio"
	"context"
	"crypto/rand"
	"errors"
	"fmt"
	"io"
	"regexp"
	"strings"

	"github.com/spf13/cobra"

	api "svc.dev/clients/apiclient"
	"svc.dev/tools/svc/internal/credential"
)

// stampLayout is the contract's timestamp form (RFC 3339 UTC, 3 fractional digits).
const stampLayout = "2006-01-02T15:04:05.000Z"

type loginFlags struct {
	email, password, orgName string
	nonInteractive           bool
}

func (a *app) loginCommand() *cobra.Command {
	var f loginFlags
	cmd := &cobra.Command{
		Use:   "login",
		Short: "Sign in (or sign up) and save an API key for this API",
		Long: `Signs in with email and password, or signs up when no user has that email (the
personal organization is created by the API). Then saves an API key, with the session, in
the credentials file: the key already saved for this API when it is the same user and
organization's and the API still accepts it (one cheap authenticated call), else a new key
named after this host. Logging in again therefore does not pile up keys.

Missing --email or --password are prompted for when a terminal is attached (the password
without echo); with --non-interactive, or without a terminal, they are required.`,
		Example: `  svc login
  svc login --api https://svc.example.com --email me@example.com
  svc login --non-interactive --email ci@example.com --password "$PASSWORD"
  svc login --org-name "Acme Inc"   # use (or create) that organization instead of the personal one`,
		Args: args(),
		RunE: a.run(func(cmd *cobra.Command, _ []string) error { return a.login(cmd, f) }),
	}
	cmd.Flags().StringVar(&f.email, "email", "", "account email")
	cmd.Flags().StringVar(&f.password, "password", "", "account password (prompted for on a terminal when absent)")
	cmd.Flags().BoolVar(&f.nonInteractive, "non-interactive", false, "never prompt: missing flags are an error")
	cmd.Flags().StringVar(&f.orgName, "org-name", "", "organization to use, created when you have none by that name (default: the personal one)")
	return cmd
}

func (a *app) login(cmd *cobra.Command, f loginFlags) error {
	ctx := cmd.Context()
	apiURL, err := a.apiURL(cmd)
	if err != nil {
		return err
	}
	interactive := !f.nonInteractive && a.env.StdinIsTerminal
	in := bufio.NewReader(a.env.Stdin)
	prompt := a.env.Stderr
	if f.email == "" {
		if !interactive {
			return usagef(cmd, "--email is required (no terminal to prompt on, or --non-interactive)")
		}
		fmt.Fprintf(prompt, "Logging in to %s\n", apiURL)
		if f.email, err = readLine(ctx, in, prompt, "Email: "); err != nil {
			return err
		}
		if f.email == "" {
			return usagef(cmd, "an email is required")
		}
	}
	if f.password == "" {
		if !interactive {
			return usagef(cmd, "--password is required (no terminal to prompt on, or --non-interactive)")
		}
		if f.password, err = a.readPassword(ctx, prompt, "Password: "); err != nil {
			return err
		}
		if f.password == "" {
			return usagef(cmd, "a password is required")
		}
	}
	c, err := a.client(apiURL)
	if err != nil {
		return err
	}

	// ---------------------------------------------------------------------------------
	// Sign in, or sign up when the user does not exist.
	signedUp := false
	sess, err := c.SignIn(ctx, f.email, f.password)
	if api.IsCode(err, "USER_NOT_FOUND") {
		if interactive {
			fmt.Fprintf(prompt, "No account for %s yet: creating one.\n", f.email)
			again, err := a.readPassword(ctx, prompt, "Confirm password: ")
			if err != nil {
				return err
			}
			if again != f.password {
				return &ExitError{Code: ExitFailure, Msg: "the passwords do not match; nothing was created"}
			}
		}
		name, _, _ := strings.Cut(f.email, "@")
		sess, err = c.SignUp(ctx, f.email, f.password, name)
		signedUp = true
	}
	if err != nil {
		return err
	}

	// ---------------------------------------------------------------------------------
	// The organization the key will belong to.
	var org *api.Organization
	if f.orgName != "" {
		if org, err = a.useOrganization(ctx, c, sess.Cookie, f.orgName); err != nil {
			return err
		}
	} else if org, err = activeOrganization(ctx, c, sess.Cookie); err != nil {
		return err
	}

	// ---------------------------------------------------------------------------------
	// Reuse the saved key while it works, else mint one; save.
	store, err := a.credentials()
	if err != nil {
		return err
	}
	key, reused, err := a.loginKey(ctx, c, store, apiURL, sess, org)
	if err != nil {
		return err
	}
	saved := credential.Session{
		UserID: sess.User.ID, UserEmail: sess.User.Email, OrganizationID: org.ID, OrganizationSlug: org.Slug,
		APIKey: key.Key, APIKeyID: key.ID, SessionCookie: sess.Cookie, CreatedAt: a.env.Now().UTC().Format(stampLayout),
	}
	if err := store.Put(apiURL, saved); err != nil {
		return err
	}

	if a.jsonOutput() {
		return writeJSON(a.out(), map[string]any{
			"api": apiURL, "signedUp": signedUp, "userId": saved.UserID, "userEmail": saved.UserEmail,
			"organizationId": saved.OrganizationID, "organizationSlug": saved.OrganizationSlug,
			"apiKeyId": saved.APIKeyID, "apiKeyName": key.Name, "apiKeyReused": reused, "credentials": store.Path(),
		})
	}
	verb := "Signed in"
	if signedUp {
		verb = "Signed up"
	}
	fmt.Fprintf(a.out(), "%s as %s (organization %s) on %s.\n", verb, saved.UserEmail, saved.OrganizationSlug, apiURL)
	if reused {
		fmt.Fprintf(a.out(), "API key %s (%q) still works: kept in %s.\n", key.ID, key.Name, store.Path())
		return nil
	}
	fmt.Fprintf(a.out(), "API key %s (%q, starts %s) saved to %s.\n", key.ID, key.Name, key.Start, store.Path())
	return nil
}

// readLine prompts and reads a line; Ctrl-C (ctx ending) abandons the read.
func readLine(ctx context.Context, in *bufio.Reader, prompt io.Writer, label string) (string, error) {
	fmt.Fprint(prompt, label)
	type read struct {
		line string
		err  error
	}
	ch := make(chan read, 1)
	go func() {
		line, err := in.ReadString('\n')
		ch <- read{line, err}
	}()
	select {
	case <-ctx.Done():
		fmt.Fprintln(prompt)
		return "", ctx.Err()
	case r := <-ch:
		if r.err != nil && (r.line == "" || !errors.Is(r.err, io.EOF)) {
			return "", fmt.Errorf("read %s: %w", strings.TrimSuffix(strings.ToLower(label), ": "), r.err)
		}
		return strings.TrimSpace(r.line), nil
	}
}

func (a *app) readPassword(ctx context.Context, prompt io.Writer, label string) (string, error) {
	fmt.Fprint(prompt, label)
	b, err := a.env.ReadPassword(ctx)
	fmt.Fprintln(prompt) // the newline the user typed was not echoed
	if err != nil {
		if ctx.Err() != nil {
			return "", ctx.Err()
		}
		return "", fmt.Errorf("read password: %w", err)
	}
	return strings.TrimRight(string(b), "\r\n"), nil
}

// activeOrganization is the session's active organization (the personal one after sign-up).
func activeOrganization(ctx context.Context, c *api.Client, cookie string) (*api.Organization, error) {
	info, err := c.GetSession(ctx, cookie)
	if err != nil {
		return nil, err
	}
	if info == nil {
		return nil, errors.New("the new session is not valid")
	}
	orgs, err := c.ListOrganizations(ctx, cookie)
	if err != nil {
		return nil, err
	}
	if info.Session.ActiveOrganizationID == nil {
		// The user left their organizations; pick the first one as the API does on sign-in.
		if len(orgs) == 0 {
			return nil, &api.Error{Status: 401, Code: "no_active_organization", Message: "you belong to no organization: use --org-name to create one"}
		}
		if err := c.SetActiveOrganization(ctx, cookie, orgs[0].ID); err != nil {
			return nil, err
		}
		return &orgs[0], nil
	}
	for i := range orgs {
		if orgs[i].ID == *info.Session.ActiveOrganizationID {
			return &orgs[i], nil
		}
	}
	return nil, fmt.Errorf("active organization %s is not in your organization list", *info.Session.ActiveOrganizationID)
}

var slugUnsafe = regexp.MustCompile(`[^a-z0-9]+`) //nolint:gochecknoglobals // compiled pattern, read only

// slugFor turns an organization name into a slug (lowercase letters and digits separated by
// single hyphens, at most 64).
func slugFor(name string) string {
	s := strings.Trim(slugUnsafe.ReplaceAllString(strings.ToLower(name), "-"), "-")
	if len(s) > 50 {
		s = strings.TrimRight(s[:50], "-")
	}
	if s == "" {
		s = "org"
	}
	return s
}

// useOrganization makes the organization named name active, creating it when the user has
// none by that name.
func (a *app) useOrganization(ctx context.Context, c *api.Client, cookie, name string) (*api.Organization, error) {
	orgs, err := c.ListOrganizations(ctx, cookie)
	if err != nil {
		return nil, err
	}
	for i := range orgs {
		if orgs[i].Name == name {
			if err := c.SetActiveOrganization(ctx, cookie, orgs[i].ID); err != nil {
				return nil, err
			}
			return &orgs[i], nil
		}
	}
	slug := slugFor(name)
	org, err := c.CreateOrganization(ctx, cookie, name, slug)
	if api.IsCode(err, "ORGANIZATION_ALREADY_EXISTS") {
		// Someone else has the slug: add a random suffix.
		org, err = c.CreateOrganization(ctx, cookie, name, slug+"-"+randomSuffix(6))
	}
	if err != nil {
		return nil, fmt.Errorf("create organization %q: %w", name, err)
	}
	return org, nil
}

func randomSuffix(n int) string {
	const alphabet = "abcdefghijklmnopqrstuvwxyz0123456789"
	b := make([]byte, n)
	_, _ = rand.Read(b)
	for i := range b {
		b[i] = alphabet[int(b[i])%len(alphabet)]
	}
	return string(b)
}

func (a *app) logoutCommand() *cobra.Command {
	var revoke bool
	cmd := &cobra.Command{
		Use:   "logout [--revoke]",
		Short: "Remove the saved credentials for this API",
		Long: `Removes this API's entry from the credentials file and leaves the others. Without
--revoke the API key and session stay valid on the server. With --revoke, the saved key is
revoked first (with the saved session, as keys are managed) and the session is signed out;
if the server refuses, the entry is kept so that you can log in again and retry.`,
		Example: `  svc logout
  svc logout --revoke`,
		Args: args(),
		RunE: a.run(func(cmd *cobra.Command, _ []string) error { return a.logout(cmd, revoke) }),
	}
	cmd.Flags().BoolVar(&revoke, "revoke", false, "revoke the saved API key and end the saved session on the server")
	return cmd
}

func (a *app) logout(cmd *cobra.Command, revoke bool) error {
	apiURL, err := a.apiURL(cmd)
	if err != nil {
		return err
	}
	store, err := a.credentials()
	if err != nil {
		return err
	}
	var revokedKey string
	if revoke {
		if revokedKey, err = a.revokeSaved(cmd.Context(), store, apiURL); err != nil {
			return err
		}
	}
	removed, err := store.Remove(apiURL)
	if err != nil {
		return err
	}
	if a.jsonOutput() {
		out := map[string]any{"api": apiURL, "removed": removed}
		if revoke {
			out["revokedApiKeyId"] = revokedKey
		}
		return writeJSON(a.out(), out)
	}
	switch {
	case removed && revoke:
		fmt.Fprintf(a.out(), "Logged out of %s; API key %s revoked and the session ended.\n", apiURL, revokedKey)
	case removed:
		fmt.Fprintf(a.out(), "Logged out of %s (the API key and session stay valid on the server; --revoke revokes them).\n", apiURL)
	default:
		fmt.Fprintf(a.out(), "Not logged in to %s; nothing to remove.\n", apiURL)
	}
	return nil
}

func (a *app) tokenCommand() *cobra.Command {
	return &cobra.Command{
		Use:     "token",
		Short:   "Print the saved API key",
		Example: `  curl -H "Authorization: Bearer $(svc token)" http://localhost:8080/api/workflows`,
		Args:    args(),
		RunE: a.run(func(cmd *cobra.Command, _ []string) error {
			apiURL, err := a.apiURL(cmd)
			if err != nil {
				return err
			}
			s, err := a.session(apiURL)
			if err != nil {
				return err
			}
			_, err = fmt.Fprintln(a.out(), s.APIKey)
			return err
		}),
	}
}

func (a *app) envCommand() *cobra.Command {
	var shell string
	cmd := &cobra.Command{
		Use:   "env",
		Short: "Print shell exports of SVC_API_KEY and SVC_API",
		Example: `  eval "$(svc env)"
  svc env --shell fish | source
  svc env --shell powershell | Invoke-Expression`,
		Args: args(),
		RunE: a.run(func(cmd *cobra.Command, _ []string) error {
			if shell != "sh" && shell != "fish" && shell != "powershell" {
				return usagef(cmd, "invalid --shell %q: want sh, fish or powershell", shell)
			}
			apiURL, err := a.apiURL(cmd)
			if err != nil {
				return err
			}
			s, err := a.session(apiURL)
			if err != nil {
				return err
			}
			_, err = io.WriteString(a.out(), shellExports(shell, [][2]string{{EnvAPIKey, s.APIKey}, {EnvAPI, apiURL}}))
			return err
		}),
	}
	cmd.Flags().StringVar(&shell, "shell", "sh", "shell syntax: sh, fish or powershell")
	_ = cmd.RegisterFlagCompletionFunc("shell", cobra.FixedCompletions([]string{"sh", "fish", "powershell"}, cobra.ShellCompDirectiveNoFileComp))
	return cmd
}

// shellExports writes name=value pairs in the shell's syntax, each value single-quoted.
func shellExports(shell string, vars [][2]string) string {
	var b strings.Builder
	for _, v := range vars {
		switch shell {
		case "fish":
			q := strings.NewReplacer(`\`, `\\`, `'`, `\'`).Replace(v[1])
			fmt.Fprintf(&b, "set -gx %s '%s';\n", v[0], q)
		case "powershell":
			fmt.Fprintf(&b, "$env:%s = '%s'\n", v[0], strings.ReplaceAll(v[1], "'", "''"))
		default:
			fmt.Fprintf(&b, "export %s='%s'\n", v[0], strings.ReplaceAll(v[1], "'", `'\''`))
		}
	}
	return b.String()
}

func (a *app) whoamiCommand() *cobra.Command {
	return &cobra.Command{
		Use:   "whoami",
		Short: "Print the saved user email, organization slug and API URL",
		Args:  args(),
		RunE: a.run(func(cmd *cobra.Command, _ []string) error {
			apiURL, err := a.apiURL(cmd)
			if err != nil {
				return err
			}
			s, err := a.session(apiURL)
			if err != nil {
				return err
			}
			if a.jsonOutput() {
				return writeJSON(a.out(), map[string]any{
					"email": s.UserEmail, "organizationSlug": s.OrganizationSlug, "api": apiURL,
					"userId": s.UserID, "organizationId": s.OrganizationID, "apiKeyId": s.APIKeyID,
				})
			}
			return table(a.out(), []string{"EMAIL", "ORGANIZATION", "API"}, [][]string{{s.UserEmail, s.OrganizationSlug, apiURL}})
		}),
	}
}

// ---------------------------------------------------------------------------------------
// svc key

func (a *app) keyCommand() *cobra.Command {
	return a.group("key", "Manage the API keys of your organization (needs the saved session)", []string{"keys"},
		a.keyCreateCommand(), a.keyListCommand(), a.keyRevokeCommand())
}

// keySession is the client and session cookie for key administration: keys are managed only
// with a session, never with a key.
func (a *app) keySession(cmd *cobra.Command) (*api.Client, credential.Session, string, error) {
	apiURL, err := a.apiURL(cmd)
	if err != nil {
		return nil, credential.Session{}, "", err
	}
	s, err := a.session(apiURL)
	if err != nil {
		return nil, credential.Session{}, "", err
	}
	c, err := a.client(apiURL)
	if err != nil {
		return nil, credential.Session{}, "", err
	}
	return c, s, apiURL, nil
}

// sessionExpired explains a refused session.
func sessionExpired(err error) error {
	if api.IsCode(err, "UNAUTHORIZED") || api.IsCode(err, "unauthorized") {
		return &ExitError{Code: ExitFailure, Msg: fmt.Sprintf("%v: the saved session has expired or was revoked; run 'svc login' again", err)}
	}
	return err
}

func (a *app) keyCreateCommand() *cobra.Command {
	var name string
	cmd := &cobra.Command{
		Use:     "create --name <name>",
		Short:   "Mint an API key; its raw value is printed once",
		Example: `  svc key create --name ci`,
		Args:    args(),
		RunE: a.run(func(cmd *cobra.Command, _ []string) error {
			if strings.TrimSpace(name) == "" {
				return usagef(cmd, "--name is required")
			}
			c, s, _, err := a.keySession(cmd)
			if err != nil {
				return err
			}
			key, raw, err := c.CreateAPIKey(cmd.Context(), s.SessionCookie, name)
			if err != nil {
				return sessionExpired(err)
			}
			if a.jsonOutput() {
				return writeJSON(a.out(), raw)
			}
			fmt.Fprintf(a.out(), "Created API key %s (%q) for organization %s.\n", key.ID, key.Name, s.OrganizationSlug)
			fmt.Fprintf(a.out(), "Copy it now, it is not shown again:\n\n  %s\n\n", key.Key)
			return nil
		}),
	}
	cmd.Flags().StringVar(&name, "name", "", "the key's name (required)")
	return cmd
}

// keyView is the listing shape: never the raw key.
type keyView struct {
	ID          string  `json:"id"`
	Name        string  `json:"name"`
	Start       string  `json:"start"`
	CreatedAt   string  `json:"createdAt"`
	LastRequest *string `json:"lastRequest"`
}

func toKeyView(k api.APIKey) keyView {
	return keyView{ID: k.ID, Name: k.Name, Start: k.Start, CreatedAt: k.CreatedAt, LastRequest: k.LastRequest}
}

func (a *app) keyListCommand() *cobra.Command {
	return &cobra.Command{
		Use:     "list",
		Aliases: []string{"ls"},
		Short:   "List the organization's API keys (never their raw values)",
		Args:    args(),
		RunE: a.run(func(cmd *cobra.Command, _ []string) error {
			c, s, _, err := a.keySession(cmd)
			if err != nil {
				return err
			}
			keys, err := c.ListAPIKeys(cmd.Context(), s.SessionCookie)
			if err != nil {
				return sessionExpired(err)
			}
			views := make([]keyView, 0, len(keys))
			for _, k := range keys {
				views = append(views, toKeyView(k))
			}
			if a.jsonOutput() {
				return writeJSON(a.out(), views)
			}
			rows := make([][]string, 0, len(views))
			for _, k := range views {
				last := "never"
				if k.LastRequest != nil {
					last = when(*k.LastRequest)
				}
				mark := ""
				if k.ID == s.APIKeyID {
					mark = " (this CLI)"
				}
				rows = append(rows, []string{k.ID, k.Name + mark, k.Start + "…", when(k.CreatedAt), last})
			}
			return table(a.out(), []string{"ID", "NAME", "START", "CREATED", "LAST USED"}, rows)
		}),
	}
}

func (a *app) keyRevokeCommand() *cobra.Command {
	return &cobra.Command{
		Use:   "revoke <key-id>",
		Short: "Revoke an API key; it is refused from the next request on",
		Args:  args("key-id"),
		RunE: a.run(func(cmd *cobra.Command, argv []string) error {
			c, s, _, err := a.keySession(cmd)
			if err != nil {
				return err
			}
			if err := c.RevokeAPIKey(cmd.Context(), s.SessionCookie, argv[0]); err != nil {
				return sessionExpired(err)
			}
			if argv[0] == s.APIKeyID {
				fmt.Fprintln(a.env.Stderr, "svc: that was the key this CLI uses for this API: run 'svc login' to mint a new one.")
			}
			if a.jsonOutput() {
				return writeJSON(a.out(), map[string]any{"id": argv[0], "revoked": true})
			}
			fmt.Fprintf(a.out(), "Revoked API key %s.\n", argv[0])
			return nil
		}),
	}
}
