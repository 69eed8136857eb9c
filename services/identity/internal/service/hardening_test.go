package service_test

import (
	"context"
	"net/http"
	"regexp"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/stretchr/testify/require"

	"svc.dev/libs/internalauth"
	"svc.dev/libs/testkit"
	"svc.dev/services/identity/internal/service"
)

// resetLink is the last reset token the dev mailer logged for email.
func (b *testBundle) resetToken(t *testing.T, email string) string {
	t.Helper()
	all := regexp.MustCompile(`"to":"`+regexp.QuoteMeta(email)+`","link":"[^"]*token=([A-Za-z0-9]{32})"`).FindAllStringSubmatch(b.logs.String(), -1)
	require.NotEmpty(t, all, "the dev mailer logs the reset link: %s", b.logs.String())
	return all[len(all)-1][1]
}

func (b *testBundle) requestReset(t *testing.T, email string) string {
	t.Helper()
	r := b.client(t).post("/api/auth/request-password-reset", map[string]any{"email": email})
	require.Equal(t, http.StatusOK, r.Status, r.Raw)
	return b.resetToken(t, email)
}

// requireLimited calls try until it answers 429 RATE_LIMITED and checks that this happened
// after burst allowed calls — plus the tokens the bucket got back meanwhile, one per
// interval, so that a slow machine does not fail the test — and that every allowed call
// answered allowed.
func requireLimited(t *testing.T, burst int, interval time.Duration, allowed int, try func(i int) response) {
	t.Helper()
	start := time.Now()
	for i := 0; i < 3*burst; i++ {
		r := try(i)
		if r.Status == http.StatusTooManyRequests {
			requireCode(t, r, 429, "RATE_LIMITED")
			require.NotEmpty(t, r.Header.Get("Retry-After"))
			refilled := int(time.Since(start) / interval)
			require.GreaterOrEqual(t, i, burst, "refused too early")
			require.LessOrEqual(t, i, burst+refilled, "allowed %d in %s", i, time.Since(start))
			return
		}
		require.Equal(t, allowed, r.Status, r.Raw)
	}
	t.Fatalf("never limited after %d calls", 3*burst)
}

// The routes that cost a password hash (or a mail) are limited per client address, and
// change-password per user, with the sign-in limiter's RATE_LIMITED.
func TestPasswordRoutesAreLimited(t *testing.T) {
	t.Parallel()

	t.Run("ResetPasswordPerAddress", func(t *testing.T) {
		t.Parallel()
		b := setup(t, nil)
		a := b.signUp(t, "limreset")
		requireLimited(t, 10, 6*time.Second, http.StatusBadRequest, func(i int) response {
			return b.client(t).post("/api/auth/reset-password", map[string]any{"token": "bogus" + strconv.Itoa(i), "newPassword": "long enough pw"})
		})
		// Asking for links from the same address draws on the same bucket.
		requireCode(t, b.client(t).post("/api/auth/request-password-reset", map[string]any{"email": a.email}), 429, "RATE_LIMITED")
	})

	t.Run("ChangePasswordPerUser", func(t *testing.T) {
		t.Parallel()
		b := setup(t, nil)
		a := b.signUp(t, "limchange")
		requireLimited(t, 10, 6*time.Second, http.StatusUnauthorized, func(int) response {
			return a.c.post("/api/auth/change-password", map[string]any{"currentPassword": "guess guess", "newPassword": "new password"})
		})
		requireCode(t, a.c.post("/api/auth/change-password", map[string]any{"currentPassword": password, "newPassword": "new password"}), 429, "RATE_LIMITED")
	})

	t.Run("SignUpPerAddress", func(t *testing.T) {
		t.Parallel()
		b := setup(t, nil)
		requireLimited(t, 30, 2*time.Second, http.StatusOK, func(i int) response {
			return b.client(t).post("/api/auth/sign-up/email", map[string]any{"email": email("many" + strconv.Itoa(i)), "password": password})
		})
	})
}

// Identity can be reached without the gateway, so a client-made X-Forwarded-For must not
// choose the sign-in bucket.
func TestForwardedForIsNotBelieved(t *testing.T) {
	t.Parallel()
	b := setup(t, nil)
	a := b.signUp(t, "xff")
	for i := range 10 {
		c := b.client(t, "X-Forwarded-For", "198.51.100."+strconv.Itoa(i))
		requireCode(t, c.post("/api/auth/sign-in/email", map[string]any{"email": a.email, "password": "guess guess"}), 401, "INVALID_CREDENTIALS")
	}
	requireCode(t, b.client(t, "X-Forwarded-For", "198.51.100.99").post("/api/auth/sign-in/email", map[string]any{"email": a.email, "password": password}), 429, "RATE_LIMITED")

	// An address the gateway signed is believed, and has its own bucket.
	require.Equal(t, http.StatusOK, b.viaGateway(t, "198.51.100.99").post("/api/auth/sign-in/email", map[string]any{"email": a.email, "password": password}).Status)
	// A signature made for another request is not: the client is its peer address again.
	h := http.Header{}
	b.signer.Sign(h, http.MethodPost, "/api/auth/sign-up/email", "", internalauth.Identity{AuthMode: internalauth.ModeService, Service: "gateway", ClientIP: "198.51.100.98"}, time.Now())
	replayed := b.client(t, internalauth.HeaderIdentity, h.Get(internalauth.HeaderIdentity), internalauth.HeaderTimestamp, h.Get(internalauth.HeaderTimestamp),
		internalauth.HeaderSignature, h.Get(internalauth.HeaderSignature))
	requireCode(t, replayed.post("/api/auth/sign-in/email", map[string]any{"email": a.email, "password": password}), 429, "RATE_LIMITED")
}

// Reset links reach the log only when SVC_MAIL=log says so; by default no mail is sent and
// no token is written anywhere.
func TestResetLinksAreNotLoggedByDefault(t *testing.T) {
	t.Parallel()
	b := setup(t, map[string]string{"SVC_MAIL": ""})
	a := b.signUp(t, "nolog")
	r := b.client(t).post("/api/auth/request-password-reset", map[string]any{"email": a.email})
	require.Equal(t, http.StatusOK, r.Status, r.Raw)
	require.Eventually(t, func() bool { return strings.Contains(b.logs.String(), "password reset not sent") }, 5*time.Second, 10*time.Millisecond)
	require.NotContains(t, b.logs.String(), "token=")
	require.NotContains(t, b.logs.String(), a.email)
	require.Contains(t, b.logs.String(), "SVC_MAIL=none", "start-up says that mail is off")

	logged := setup(t, nil) // SVC_MAIL=log
	require.Contains(t, logged.logs.String(), "SVC_MAIL=log", "start-up warns that links are logged")
}

// Password hashes run a few at a time: past the slots, a request waits briefly and is then
// told to retry, so a burst on the open routes cannot take memory in proportion to its size.
func TestPasswordHashingIsBounded(t *testing.T) {
	t.Parallel()
	b := setupConfig(t, map[string]string{"SVC_BOOTSTRAP": "1"}, func(cfg *service.Config) {
		cfg.HashSlots, cfg.HashWait = 1, time.Millisecond
	})
	var (
		wg     sync.WaitGroup
		mu     sync.Mutex
		status = map[int]int{}
	)
	for i := range 12 {
		wg.Go(func() {
			r := b.viaGateway(t, "198.51.100."+strconv.Itoa(i)).post("/api/auth/sign-up/email", map[string]any{"email": email("burst" + strconv.Itoa(i)), "password": password})
			if r.Status == http.StatusTooManyRequests {
				requireCode(t, r, 429, "RATE_LIMITED")
				require.Equal(t, "1", r.Header.Get("Retry-After"))
			}
			mu.Lock()
			status[r.Status]++
			mu.Unlock()
		})
	}
	wg.Wait()
	require.Positive(t, status[http.StatusTooManyRequests], "%v", status)
	require.Equal(t, 12, status[http.StatusOK]+status[http.StatusTooManyRequests], "%v", status)
}

// A completed reset, and a password change, void every other reset link of the user.
func TestOlderResetLinksDie(t *testing.T) {
	t.Parallel()
	b := setup(t, nil)

	t.Run("WithAReset", func(t *testing.T) {
		t.Parallel()
		a := b.signUp(t, "older")
		first := b.requestReset(t, a.email)
		second := b.requestReset(t, a.email)
		require.NotEqual(t, first, second)
		require.Equal(t, http.StatusOK, b.client(t).post("/api/auth/reset-password", map[string]any{"token": second, "newPassword": "the new one"}).Status)
		requireCode(t, b.client(t).post("/api/auth/reset-password", map[string]any{"token": first, "newPassword": "the attacker's"}), 400, "INVALID_TOKEN")
	})

	t.Run("WithAChange", func(t *testing.T) {
		t.Parallel()
		a := b.signUp(t, "changed")
		tok := b.requestReset(t, a.email)
		r := a.c.post("/api/auth/change-password", map[string]any{"currentPassword": password, "newPassword": "changed on purpose"})
		require.Equal(t, http.StatusOK, r.Status, r.Raw)
		requireCode(t, b.client(t).post("/api/auth/reset-password", map[string]any{"token": tok, "newPassword": "the attacker's"}), 400, "INVALID_TOKEN")
	})
}

// Headers are the client's to choose: a User-Agent that is not UTF-8, or whose cut would
// split a character, is stored cleaned, never a 500.
func TestUserAgentIsCleaned(t *testing.T) {
	t.Parallel()
	b := setup(t, nil)
	for i, ua := range []string{"Mozilla\xff", strings.Repeat("a", 511) + "é", "a\x80\x80b"} {
		c := b.client(t, "User-Agent", ua)
		up := c.post("/api/auth/sign-up/email", map[string]any{"email": email("ua" + strconv.Itoa(i)), "password": password})
		require.Equal(t, http.StatusOK, up.Status, up.Raw)
		in := c.post("/api/auth/sign-in/email", map[string]any{"email": obj(t, up.Body["user"])["email"], "password": password})
		require.Equal(t, http.StatusOK, in.Status, in.Raw)
		tok := in.Body["token"].(string)
		s := obj(t, b.client(t, "Authorization", "Bearer "+tok).get("/api/auth/get-session").Body["session"])
		got := s["userAgent"].(string)
		require.LessOrEqual(t, len(got), 512)
		require.NotContains(t, got, "\xff")
		ch := b.client(t, "Authorization", "Bearer "+tok, "User-Agent", ua).post("/api/auth/change-password",
			map[string]any{"currentPassword": password, "newPassword": "another password", "revokeOtherSessions": true})
		require.Equal(t, http.StatusOK, ch.Status, ch.Raw)
	}
}

// Using the token, setting the password and revoking the sessions commit together: when the
// password cannot be written, the link still works and every session lives on.
func TestResetPasswordIsAtomic(t *testing.T) {
	t.Parallel()
	dbURL := testkit.NewDatabase(t)
	b := setup(t, map[string]string{"SVC_DATABASE_URL": dbURL})
	a := b.signUp(t, "atomic")
	tok := b.requestReset(t, a.email)

	conn, err := pgx.Connect(context.Background(), dbURL)
	require.NoError(t, err)
	t.Cleanup(func() { _ = conn.Close(context.Background()) })
	_, err = conn.Exec(context.Background(), `CREATE FUNCTION identity.refuse() RETURNS trigger LANGUAGE plpgsql AS $$ BEGIN RAISE EXCEPTION 'refused'; END $$;
		CREATE TRIGGER refuse BEFORE UPDATE ON identity.accounts FOR EACH ROW EXECUTE FUNCTION identity.refuse()`)
	require.NoError(t, err)
	r := b.client(t).post("/api/auth/reset-password", map[string]any{"token": tok, "newPassword": "the new one"})
	require.Equal(t, http.StatusInternalServerError, r.Status, r.Raw)
	require.Equal(t, http.StatusOK, a.c.get("/api/auth/get-session").Status)
	require.NotEqual(t, "null", strings.TrimSpace(a.c.get("/api/auth/get-session").Raw), "no session was revoked")

	_, err = conn.Exec(context.Background(), `DROP TRIGGER refuse ON identity.accounts`)
	require.NoError(t, err)
	r = b.client(t).post("/api/auth/reset-password", map[string]any{"token": tok, "newPassword": "the new one"})
	require.Equal(t, http.StatusOK, r.Status, "the failed attempt did not use the link up: %s", r.Raw)
	require.Equal(t, "null", strings.TrimSpace(a.c.get("/api/auth/get-session").Raw))
}

// The bootstrap is a mutation like any auth call: a cross-site form or fetch cannot claim it.
func TestBootstrapNeedsOriginAndJSON(t *testing.T) {
	t.Parallel()
	b := setup(t, map[string]string{"SVC_BOOTSTRAP": "1"})
	body := map[string]any{"email": "root@x.io", "password": password}
	r := b.client(t).with("Origin", "").post("/api/bootstrap", body)
	require.Equal(t, http.StatusForbidden, r.Status, r.Raw)
	require.Equal(t, "MISSING_OR_NULL_ORIGIN", r.Body["code"])
	r = b.client(t).with("Origin", "http://evil.test").post("/api/bootstrap", body)
	require.Equal(t, http.StatusForbidden, r.Status, r.Raw)
	require.Equal(t, "INVALID_ORIGIN", r.Body["code"])
	r = b.client(t).with("Content-Type", "text/plain").post("/api/bootstrap", body)
	requireError(t, r, http.StatusBadRequest, "invalid_body")
	require.Contains(t, r.Body["message"], "Content-Type")

	r = b.client(t).post("/api/bootstrap", body)
	require.Equal(t, http.StatusCreated, r.Status, r.Raw)
}
