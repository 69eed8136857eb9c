// Package service is the composition root of identity: it reads the settings, builds the
// shared infrastructure, the adapters, the use cases and the service's ports, and serves them.
package service

import (
	"context"
	"crypto/hmac"
	"crypto/sha256"
	"errors"
	"fmt"
	"log/slog"
	"net/http"
	"net/url"
	"runtime"
	"strings"
	"time"

	"svc.dev/libs/boot"
	"svc.dev/libs/env"
	"svc.dev/libs/ratelimit"
	"svc.dev/proto/gen/identity/v1/identityv1connect"
	"svc.dev/services/identity/internal/adapters/argon"
	"svc.dev/services/identity/internal/adapters/mail"
	"svc.dev/services/identity/internal/adapters/postgres"
	"svc.dev/services/identity/internal/adapters/redis"
	"svc.dev/services/identity/internal/app"
	"svc.dev/services/identity/internal/app/port"
	"svc.dev/services/identity/internal/domain/session"
	"svc.dev/services/identity/internal/ports/httpapi"
	"svc.dev/services/identity/internal/ports/rpc"
	"svc.dev/services/identity/migrations"
)

// Name is the service's name in logs, spans and the database's pg_stat_activity.
const Name = "identity"

// KeyUsageInterval is how often API key uses are written: lastRequest is at most this late.
const KeyUsageInterval = time.Second

// needs says which stores identity uses: Postgres for everything, Redis for the attempt
// limiters.
func needs() boot.Needs { return boot.Needs{Postgres: true, Redis: true} }

// Config is every setting identity reads.
type Config struct {
	Addr string
	Base boot.Config
	// PublicURL is the system's public base URL (SVC_PUBLIC_URL): its origin is trusted, its
	// scheme decides the cookie's Secure attribute, and mailed links point at it.
	PublicURL *url.URL
	// Origins are the trusted origins: PublicURL's and SVC_TRUSTED_ORIGINS.
	Origins httpapi.Origins
	// AuthSecret signs session cookies: SVC_AUTH_SECRET, or one derived from
	// SVC_INTERNAL_SECRET when that is unset.
	AuthSecret []byte
	// Bootstrap is SVC_BOOTSTRAP=1.
	Bootstrap bool
	// Mail is SVC_MAIL: MailNone (the default) sends nothing; MailLog writes every mail,
	// reset links included, to the log (development and tests only).
	Mail string
	// HashSlots is how many argon2id hashes may run at once, and HashWait how long a request
	// waits for a slot before it is answered 429 (argon.Gate). Not settings: LoadConfig sets
	// GOMAXPROCS and DefaultHashWait; tests narrow them.
	HashSlots int
	HashWait  time.Duration
	// Ceilings are SVC_MAX_ORGANIZATIONS_PER_USER, SVC_MAX_API_KEYS_PER_ORG and
	// SVC_MAX_API_KEYS_PER_USER (port.Ceilings).
	Ceilings port.Ceilings
}

// maxCeiling bounds the ceiling settings: far above any real need, and low enough that a
// typo (an extra zero or three) is refused instead of lifting the ceiling altogether.
const maxCeiling = 100_000

// The values of SVC_MAIL.
const (
	MailNone = "none"
	MailLog  = "log"
)

// DefaultHashWait is how long a request waits for a password-hashing slot.
const DefaultHashWait = 2 * time.Second

// LoadConfig reads the settings from lookup (os.LookupEnv) and reports every bad one at once.
func LoadConfig(lookup env.LookupFunc) (Config, error) {
	r := env.New(lookup)
	cfg := Config{
		Addr:      r.Addr("SVC_IDENTITY_ADDR", ":8081"),
		Base:      boot.ReadConfig(r, needs()),
		Bootstrap: r.OneOf("SVC_BOOTSTRAP", "0", "0", "1") == "1",
		Mail:      r.OneOf("SVC_MAIL", MailNone, MailNone, MailLog),
		HashSlots: runtime.GOMAXPROCS(0),
		HashWait:  DefaultHashWait,
	}
	def := port.DefaultCeilings()
	cfg.Ceilings = port.Ceilings{
		OrganizationsPerUser: r.Int("SVC_MAX_ORGANIZATIONS_PER_USER", def.OrganizationsPerUser, 1, maxCeiling),
		KeysPerOrganization:  r.Int("SVC_MAX_API_KEYS_PER_ORG", def.KeysPerOrganization, 1, maxCeiling),
		KeysPerUser:          r.Int("SVC_MAX_API_KEYS_PER_USER", def.KeysPerUser, 1, maxCeiling),
	}
	var errs []error
	public := r.URL("SVC_PUBLIC_URL", "http://localhost:8080", "http", "https")
	u, err := url.Parse(public)
	if err == nil {
		cfg.PublicURL = u
	}
	trusted := strings.Split(r.String("SVC_TRUSTED_ORIGINS", ""), ",")
	if cfg.Origins, err = httpapi.NewOrigins(trusted...); err != nil {
		errs = append(errs, fmt.Errorf("setting SVC_TRUSTED_ORIGINS: %w", err))
	} else if cfg.PublicURL != nil {
		own, err := httpapi.NewOrigins(public)
		if err != nil {
			errs = append(errs, fmt.Errorf("setting SVC_PUBLIC_URL: %w", err))
		}
		for o := range own {
			cfg.Origins[o] = true
		}
	}
	switch secret := r.String("SVC_AUTH_SECRET", ""); {
	case secret == "":
		cfg.AuthSecret = DeriveAuthSecret(cfg.Base.InternalSecret)
	case len(secret) < 32:
		errs = append(errs, errors.New("setting SVC_AUTH_SECRET must be at least 32 bytes"))
	default:
		cfg.AuthSecret = []byte(secret)
	}
	return cfg, errors.Join(append([]error{r.Err()}, errs...)...)
}

// DeriveAuthSecret is the cookie secret used when SVC_AUTH_SECRET is unset:
// HMAC-SHA256(SVC_INTERNAL_SECRET, "svc identity session cookie v1"). It is a separate key
// (a leaked cookie secret says nothing about the internal one), but rotating the internal
// secret then also invalidates every signed cookie; raw bearer tokens keep working.
func DeriveAuthSecret(internalSecret string) []byte {
	m := hmac.New(sha256.New, []byte(internalSecret))
	m.Write([]byte("svc identity session cookie v1"))
	return m.Sum(nil)
}

// Application is a started identity.
type Application struct {
	base    *boot.Base
	addr    string
	handler http.Handler
	usage   *postgres.Recorder
}

// NewApplication connects the stores, applies migrations and assembles the HTTP surface.
func NewApplication(ctx context.Context, cfg Config, log *slog.Logger) (*Application, error) {
	base, err := boot.Start(ctx, cfg.Base, boot.Spec{Name: Name, Schema: "identity", Migrations: migrations.FS, Needs: needs()}, log)
	if err != nil {
		return nil, err
	}
	signer, err := session.NewSigner(cfg.AuthSecret)
	if err != nil {
		base.Close()
		return nil, fmt.Errorf("SVC_AUTH_SECRET: %w", err)
	}

	// --- adapters ------------------------------------------------------------------------
	repos := postgres.Repositories(base.Pool, cfg.Ceilings)
	usage := postgres.NewRecorder(repos.Keys, KeyUsageInterval, log)
	limits := redis.Limits(ratelimit.NewWithOptions(base.Redis, base.Keys, log, ratelimit.Options{Meter: base.Tel.Meter}))
	// One gate for the process: memory for argon2id stays at HashSlots × 19 MiB whatever
	// arrives on the open routes.
	hasher := argon.NewGate(argon.New(argon.DefaultParams()), cfg.HashSlots, cfg.HashWait)
	var mailer port.Mailer = mail.NewDiscardMailer(log)
	if cfg.Mail == MailLog {
		mailer = mail.NewLogMailer(log)
		log.Warn("SVC_MAIL=log: mails are written to the log, password-reset links included; " +
			"whoever reads the log can reset any password. For development and tests only.")
	} else {
		log.Warn("SVC_MAIL=none: password-reset and invitation mails are not sent (no mail adapter is configured)")
	}

	// --- use cases -----------------------------------------------------------------------
	a := app.New(app.Dependencies{
		Repos:            repos,
		Hasher:           hasher,
		Mailer:           mailer,
		Limits:           limits,
		KeyUsage:         usage,
		ResetLink:        resetLink(cfg.PublicURL),
		InvitationLink:   invitationLink(cfg.PublicURL),
		BootstrapEnabled: cfg.Bootstrap,
		Now:              time.Now,
		Log:              log,
	})

	// Redis only backs the attempt limiters, which answer from process memory while Redis is
	// down: its outage marks identity degraded, not unready.
	base.Optional["redis"] = base.Checks["redis"]
	delete(base.Checks, "redis")

	// --- ports ---------------------------------------------------------------------------
	server := httpapi.NewServer(a, httpapi.Config{PublicURL: cfg.PublicURL, Origins: cfg.Origins, Signer: signer, Internal: base.Signer,
		Revocations: redis.NewRedisEpoch(base.Redis, base.Keys)}, log)
	rpcPath, rpcHandler := identityv1connect.NewIdentityServiceHandler(rpc.NewIdentityServer(a.Queries.Resolve, a.Queries.LookupOrganization, signer, log),
		base.RPCHandlerOptions()...)
	handler := base.Handler(boot.Routes{
		API:          httpapi.NewRouter(server),
		OpenPrefixes: []string{"/api/auth/", httpapi.BootstrapPath},
		RPC:          map[string]http.Handler{rpcPath: rpcHandler},
	})
	return &Application{base: base, addr: cfg.Addr, handler: handler, usage: usage}, nil
}

// resetLink builds the mailed reset URL: redirectTo (a path or a trusted URL) with the token
// in its query, or <public URL>/reset-password?token=... by default.
func resetLink(public *url.URL) func(token, redirectTo string) string {
	return func(token, redirectTo string) string {
		target := public.JoinPath("reset-password")
		if redirectTo != "" {
			if ref, err := url.Parse(redirectTo); err == nil {
				target = public.ResolveReference(ref)
			}
		}
		q := target.Query()
		q.Set("token", token)
		target.RawQuery = q.Encode()
		return target.String()
	}
}

// invitationLink builds the mailed invitation URL.
func invitationLink(public *url.URL) func(id string) string {
	return func(id string) string { return public.JoinPath("accept-invitation", id).String() }
}

// Handler is the whole HTTP surface, for tests that serve it themselves.
func (a *Application) Handler() http.Handler { return a.handler }

// Run serves until ctx is done, then drains in-flight requests.
func (a *Application) Run(ctx context.Context) error { return a.base.Serve(ctx, a.addr, a.handler) }

// Close writes the API key uses not written yet and releases the stores.
func (a *Application) Close() {
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	if err := a.usage.Close(ctx); err != nil {
		a.base.Log.Warn("api key usage lost at shutdown", "err", err)
	}
	a.base.Close()
}
