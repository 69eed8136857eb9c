package e2e

import (
	"fmt"
	"net/http"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"svc.dev/e2e/harness"
)

// TestAuthLayer walks the auth layer and its authentication rules through the gateway.
func TestAuthLayer(t *testing.T) {
	t.Parallel()
	sys := startIdentitySystem(t, nil)

	t.Run("SignUpCreatesUserOrganizationAndActiveSession", func(t *testing.T) {
		t.Parallel()
		a := signUp(t, sys, "signup")

		r := a.c.get("/api/auth/get-session")
		require.Equal(t, http.StatusOK, r.Status, r.Raw)
		session, user := obj(t, r.Body["session"]), obj(t, r.Body["user"])
		require.Equal(t, a.email, user["email"])
		require.Equal(t, a.userID, session["userId"])
		require.Regexp(t, `^org_`, session["activeOrganizationId"])
		for _, f := range []string{"expiresAt", "createdAt", "updatedAt"} {
			require.Regexp(t, `^\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d\.\d{3}Z$`, session[f], f)
		}
		expires, err := time.Parse(time.RFC3339, session["expiresAt"].(string))
		require.NoError(t, err)
		require.WithinDuration(t, time.Now().Add(7*24*time.Hour), expires, time.Hour, "sessions last 7 days")

		list := a.c.get("/api/auth/organization/list")
		require.Equal(t, http.StatusOK, list.Status, list.Raw)
		orgs := arr(t, decodeAny(t, list.Raw))
		require.Len(t, orgs, 1)
		personal := obj(t, orgs[0])
		require.Regexp(t, `^personal-[a-z0-9]{8}$`, personal["slug"])
		require.Equal(t, session["activeOrganizationId"], personal["id"])

		// A new user can call protected routes at once: the guard accepts, no route answers.
		requireError(t, guardedProbe(a.c), http.StatusNotFound, "not_found")
	})

	t.Run("SignUpAndSignInErrors", func(t *testing.T) {
		t.Parallel()
		a := signUp(t, sys, "errors")
		anon := newClient(t, sys)

		requireCode(t, anon.post("/api/auth/sign-up/email", map[string]any{"email": a.email, "password": "another password"}), 422, "USER_ALREADY_EXISTS")
		requireCode(t, anon.post("/api/auth/sign-up/email", map[string]any{"email": uniqueEmail("short"), "password": "1234567"}), 400, "PASSWORD_TOO_SHORT")
		requireCode(t, anon.post("/api/auth/sign-up/email", map[string]any{"email": uniqueEmail("long"), "password": strings.Repeat("p", 129)}), 400, "PASSWORD_TOO_LONG")
		requireCode(t, anon.post("/api/auth/sign-in/email", map[string]any{"email": a.email, "password": "wrong password"}), 401, "INVALID_CREDENTIALS")
		requireCode(t, anon.post("/api/auth/sign-in/email", map[string]any{"email": uniqueEmail("nobody"), "password": "whatever123"}), 404, "USER_NOT_FOUND")
		requireCode(t, anon.post("/api/auth/sign-up/email", "not an object"), 400, "VALIDATION_ERROR")

		r := anon.post("/api/auth/sign-in/email", map[string]any{"email": a.email, "password": a.password})
		require.Equal(t, http.StatusOK, r.Status, r.Raw)
		require.Equal(t, false, r.Body["redirect"])
		require.NotEmpty(t, r.Body["token"])
		require.True(t, strings.HasPrefix(r.Header.Get("Set-Auth-Token"), r.Body["token"].(string)+"."))
		require.Contains(t, r.Header.Get("Set-Cookie"), "svc.session_token=")
		require.Contains(t, r.Header.Get("Set-Cookie"), "HttpOnly")
	})

	t.Run("OriginIsRequiredOnMutatingCalls", func(t *testing.T) {
		t.Parallel()
		body := map[string]any{"email": uniqueEmail("origin"), "password": "long enough"}
		requireCode(t, newClient(t, sys).with(func(c *client) { c.origin = "" }).post("/api/auth/sign-up/email", body), 403, "MISSING_OR_NULL_ORIGIN")
		requireCode(t, newClient(t, sys).with(func(c *client) { c.origin = "http://evil.test" }).post("/api/auth/sign-up/email", body), 403, "INVALID_ORIGIN")
	})

	t.Run("CookieAndBearerCarryTheSameSession", func(t *testing.T) {
		t.Parallel()
		a := signUp(t, sys, "cookie")
		r := newClient(t, sys).post("/api/auth/sign-in/email", map[string]any{"email": a.email, "password": a.password})
		require.Equal(t, http.StatusOK, r.Status, r.Raw)
		cookie := sessionCookie(t, r.Header)
		signed := strings.TrimPrefix(cookie, "svc.session_token=")

		byCookie := newClient(t, sys).with(func(c *client) { c.cookie = cookie })
		requireError(t, guardedProbe(byCookie), http.StatusNotFound, "not_found")
		require.Equal(t, http.StatusOK, byCookie.get("/api/auth/get-session").Status)

		// Bearer takes the raw token or the signed cookie value.
		bySigned := newClient(t, sys).with(func(c *client) { c.token = unescape(t, signed) })
		requireError(t, guardedProbe(bySigned), http.StatusNotFound, "not_found")

		tampered := newClient(t, sys).with(func(c *client) { c.cookie = cookie[:len(cookie)-4] + "AAAA" })
		requireError(t, guardedProbe(tampered), http.StatusUnauthorized, "unauthorized")
	})

	t.Run("SignOutFailsTheNextRequest", func(t *testing.T) {
		t.Parallel()
		a := signUp(t, sys, "signout")
		requireError(t, guardedProbe(a.c), http.StatusNotFound, "not_found")
		r := a.c.post("/api/auth/sign-out", map[string]any{})
		require.Equal(t, http.StatusOK, r.Status, r.Raw)
		require.Equal(t, true, r.Body["success"])
		requireError(t, guardedProbe(a.c), http.StatusUnauthorized, "unauthorized")
		s := a.c.get("/api/auth/get-session")
		require.Equal(t, http.StatusOK, s.Status)
		require.Equal(t, "null", strings.TrimSpace(s.Raw))
	})

	t.Run("APIKeys", func(t *testing.T) {
		t.Parallel()
		a := signUp(t, sys, "keys")

		r := a.c.post("/api/auth/api-key/create", map[string]any{"name": "ci"})
		require.Equal(t, http.StatusOK, r.Status, r.Raw)
		raw, _ := r.Body["key"].(string)
		require.Regexp(t, `^svc_[A-Za-z]{64}$`, raw)
		require.Equal(t, raw[:6], r.Body["start"])
		require.Equal(t, "svc_", r.Body["prefix"])
		require.Regexp(t, `^key_`, r.Body["id"])
		keyID := r.Body["id"].(string)
		org := obj(t, a.c.get("/api/auth/get-session").Body["session"])["activeOrganizationId"]
		require.Equal(t, org, r.Body["referenceId"])

		// The raw key is returned once; listings never contain it.
		list := a.c.get("/api/auth/api-key/list")
		require.Equal(t, http.StatusOK, list.Status, list.Raw)
		require.NotContains(t, list.Raw, raw)
		require.NotContains(t, list.Raw, raw[6:20])
		keys := arr(t, list.Body["apiKeys"])
		require.Len(t, keys, 1)
		require.NotContains(t, obj(t, keys[0]), "key")
		require.InDelta(t, 1.0, list.Body["total"], 0)

		// The key authenticates as Bearer and as x-api-key.
		byBearer := newClient(t, sys).with(func(c *client) { c.token = raw })
		byHeader := newClient(t, sys).with(func(c *client) { c.apiKey = raw })
		requireError(t, guardedProbe(byBearer), http.StatusNotFound, "not_found")
		requireError(t, guardedProbe(byHeader), http.StatusNotFound, "not_found")

		// A key cannot mint, list or revoke keys.
		requireCode(t, byHeader.post("/api/auth/api-key/create", map[string]any{"name": "child"}), 401, "INVALID_REFERENCE_ID_FROM_API_KEY")
		requireCode(t, byBearer.post("/api/auth/api-key/create", map[string]any{"name": "child"}), 401, "INVALID_REFERENCE_ID_FROM_API_KEY")

		v := newClient(t, sys).post("/api/auth/api-key/verify", map[string]any{"key": raw})
		require.Equal(t, http.StatusOK, v.Status, v.Raw)
		require.Equal(t, true, v.Body["valid"])
		require.NotContains(t, obj(t, v.Body["key"]), "key")

		// lastRequest is kept fresh, at most a few seconds late.
		require.Eventually(t, func() bool {
			l := a.c.get("/api/auth/api-key/list")
			k := obj(t, arr(t, l.Body["apiKeys"])[0])
			return k["lastRequest"] != nil
		}, 15*time.Second, 200*time.Millisecond)

		// Revocation is effective on the very next request.
		d := a.c.do("DELETE", "/api/auth/api-key/"+keyID, nil)
		require.Equal(t, http.StatusOK, d.Status, d.Raw)
		require.Equal(t, true, d.Body["success"])
		requireError(t, guardedProbe(byHeader), http.StatusUnauthorized, "unauthorized")
		requireError(t, guardedProbe(byBearer), http.StatusUnauthorized, "unauthorized")
		requireCode(t, newClient(t, sys).post("/api/auth/api-key/verify", map[string]any{"key": raw}), 401, "INVALID_TOKEN")
		requireCode(t, a.c.do("DELETE", "/api/auth/api-key/"+keyID, nil), 404, "KEY_NOT_FOUND")

		// better-auth's own revocation route.
		r = a.c.post("/api/auth/api-key/create", map[string]any{"name": "second"})
		require.Equal(t, http.StatusOK, r.Status, r.Raw)
		second := newClient(t, sys).with(func(c *client) { c.apiKey = r.Body["key"].(string) })
		requireError(t, guardedProbe(second), http.StatusNotFound, "not_found")
		d = a.c.post("/api/auth/api-key/delete", map[string]any{"keyId": r.Body["id"]})
		require.Equal(t, http.StatusOK, d.Status, d.Raw)
		requireError(t, guardedProbe(second), http.StatusUnauthorized, "unauthorized")
	})

	t.Run("KeysAreScopedToTheirOrganization", func(t *testing.T) {
		t.Parallel()
		a, b := signUp(t, sys, "orga"), signUp(t, sys, "orgb")
		r := a.c.post("/api/auth/api-key/create", map[string]any{"name": "a-key"})
		require.Equal(t, http.StatusOK, r.Status, r.Raw)
		aKey := r.Body["id"].(string)

		// B sees none of A's keys and cannot revoke them: existence is not revealed.
		list := b.c.get("/api/auth/api-key/list")
		require.Equal(t, http.StatusOK, list.Status, list.Raw)
		require.NotContains(t, list.Raw, aKey)
		requireCode(t, b.c.do("DELETE", "/api/auth/api-key/"+aKey, nil), 404, "KEY_NOT_FOUND")
		requireCode(t, b.c.post("/api/auth/api-key/delete", map[string]any{"keyId": aKey}), 404, "KEY_NOT_FOUND")
		require.Equal(t, http.StatusOK, a.c.get("/api/auth/api-key/list").Status)
		require.Contains(t, a.c.get("/api/auth/api-key/list").Raw, aKey)
	})

	t.Run("OrganizationsAndActiveOrganization", func(t *testing.T) {
		t.Parallel()
		a := signUp(t, sys, "orgs")
		slug := "team-" + strings.ToLower(strings.ReplaceAll(uniqueEmail("s")[:12], "-", ""))
		r := a.c.post("/api/auth/organization/create", map[string]any{"name": "Team", "slug": slug})
		require.Equal(t, http.StatusOK, r.Status, r.Raw)
		require.Regexp(t, `^org_`, r.Body["id"])
		teamID := r.Body["id"].(string)
		members := arr(t, r.Body["members"])
		require.Len(t, members, 1)
		require.Equal(t, "owner", obj(t, members[0])["role"])
		require.Equal(t, teamID, obj(t, a.c.get("/api/auth/get-session").Body["session"])["activeOrganizationId"], "a new organization becomes active")

		requireCode(t, a.c.post("/api/auth/organization/create", map[string]any{"name": "Again", "slug": slug}), 400, "ORGANIZATION_ALREADY_EXISTS")
		require.Len(t, arr(t, decodeAny(t, a.c.get("/api/auth/organization/list").Raw)), 2)

		// Unset the active organization: domain routes answer no_active_organization until
		// set-active is called again (by slug this time).
		u := a.c.post("/api/auth/organization/set-active", map[string]any{"organizationId": nil})
		require.Equal(t, http.StatusOK, u.Status, u.Raw)
		requireError(t, guardedProbe(a.c), http.StatusUnauthorized, "no_active_organization")
		s := a.c.post("/api/auth/organization/set-active", map[string]any{"organizationSlug": slug})
		require.Equal(t, http.StatusOK, s.Status, s.Raw)
		require.Equal(t, teamID, s.Body["id"])
		requireError(t, guardedProbe(a.c), http.StatusNotFound, "not_found")

		// Another user's organization cannot be made active.
		b := signUp(t, sys, "outsider")
		requireCode(t, b.c.post("/api/auth/organization/set-active", map[string]any{"organizationId": teamID}), 403, "USER_IS_NOT_A_MEMBER_OF_THE_ORGANIZATION")

		lm := a.c.get("/api/auth/organization/list-members")
		require.Equal(t, http.StatusOK, lm.Status, lm.Raw)
		require.InDelta(t, 1.0, lm.Body["total"], 0)
	})

	t.Run("InvitationsRolesAndLeaving", func(t *testing.T) {
		t.Parallel()
		owner, invitee := signUp(t, sys, "owner"), signUp(t, sys, "invitee")
		slug := "crew-" + strings.ToLower(strings.ReplaceAll(uniqueEmail("c")[:12], "-", ""))
		r := owner.c.post("/api/auth/organization/create", map[string]any{"name": "Crew", "slug": slug})
		require.Equal(t, http.StatusOK, r.Status, r.Raw)
		crew := r.Body["id"].(string)

		inv := owner.c.post("/api/auth/organization/invite-member", map[string]any{"email": invitee.email, "role": "member"})
		require.Equal(t, http.StatusOK, inv.Status, inv.Raw)
		require.Equal(t, "pending", inv.Body["status"])
		require.Equal(t, "member", inv.Body["role"])

		acc := invitee.c.post("/api/auth/organization/accept-invitation", map[string]any{"invitationId": inv.Body["id"]})
		require.Equal(t, http.StatusOK, acc.Status, acc.Raw)
		require.Equal(t, "member", obj(t, acc.Body["member"])["role"])

		set := invitee.c.post("/api/auth/organization/set-active", map[string]any{"organizationId": crew})
		require.Equal(t, http.StatusOK, set.Status, set.Raw)
		requireError(t, guardedProbe(invitee.c), http.StatusNotFound, "not_found")

		// A plain member uses the domain API but manages neither keys nor members.
		requireCode(t, invitee.c.post("/api/auth/api-key/create", map[string]any{"name": "nope"}), 403, "FORBIDDEN")
		requireCode(t, invitee.c.post("/api/auth/organization/remove-member", map[string]any{"memberIdOrEmail": owner.email}), 403, "FORBIDDEN")

		// The only owner can neither leave nor be removed.
		requireCode(t, owner.c.post("/api/auth/organization/leave", map[string]any{"organizationId": crew}), 400, "YOU_CANNOT_LEAVE_THE_ORGANIZATION_AS_THE_ONLY_OWNER")

		lm := owner.c.get("/api/auth/organization/list-members")
		require.Equal(t, http.StatusOK, lm.Status, lm.Raw)
		require.InDelta(t, 2.0, lm.Body["total"], 0)

		requireCode(t, owner.c.post("/api/auth/organization/remove-member", map[string]any{"memberIdOrEmail": owner.email}), 400, "YOU_CANNOT_LEAVE_THE_ORGANIZATION_AS_THE_ONLY_OWNER")

		// Anyone but the only owner may leave.
		leaver := signUp(t, sys, "leaver")
		inv2 := owner.c.post("/api/auth/organization/invite-member", map[string]any{"email": leaver.email, "role": "admin"})
		require.Equal(t, http.StatusOK, inv2.Status, inv2.Raw)
		require.Equal(t, http.StatusOK, leaver.c.post("/api/auth/organization/accept-invitation", map[string]any{"invitationId": inv2.Body["id"]}).Status)
		left := leaver.c.post("/api/auth/organization/leave", map[string]any{"organizationId": crew})
		require.Equal(t, http.StatusOK, left.Status, left.Raw)
		require.Equal(t, true, left.Body["success"])
		requireCode(t, leaver.c.post("/api/auth/organization/set-active", map[string]any{"organizationId": crew}), 403, "USER_IS_NOT_A_MEMBER_OF_THE_ORGANIZATION")

		rm := owner.c.post("/api/auth/organization/remove-member", map[string]any{"memberIdOrEmail": invitee.email})
		require.Equal(t, http.StatusOK, rm.Status, rm.Raw)
		// The removed member's session no longer resolves to that organization.
		requireError(t, guardedProbe(invitee.c), http.StatusUnauthorized, "no_active_organization")
	})

	t.Run("ChangePasswordRevokesOtherSessions", func(t *testing.T) {
		t.Parallel()
		a := signUp(t, sys, "change")
		r := newClient(t, sys).post("/api/auth/sign-in/email", map[string]any{"email": a.email, "password": a.password})
		require.Equal(t, http.StatusOK, r.Status, r.Raw)
		other := newClient(t, sys).with(func(c *client) { c.token = r.Body["token"].(string) })

		c := a.c.post("/api/auth/change-password", map[string]any{"currentPassword": a.password, "newPassword": "a brand new one", "revokeOtherSessions": true})
		require.Equal(t, http.StatusOK, c.Status, c.Raw)
		requireError(t, guardedProbe(other), http.StatusUnauthorized, "unauthorized")
		next := newClient(t, sys).with(func(cl *client) { cl.token = c.Body["token"].(string) })
		requireError(t, guardedProbe(next), http.StatusNotFound, "not_found")

		requireCode(t, newClient(t, sys).post("/api/auth/sign-in/email", map[string]any{"email": a.email, "password": a.password}), 401, "INVALID_CREDENTIALS")
		require.Equal(t, http.StatusOK, newClient(t, sys).post("/api/auth/sign-in/email", map[string]any{"email": a.email, "password": "a brand new one"}).Status)
	})

	t.Run("PasswordResetRevokesAllSessions", func(t *testing.T) {
		t.Parallel()
		a := signUp(t, sys, "reset")
		anon := newClient(t, sys)
		for _, email := range []string{a.email, uniqueEmail("unknown")} {
			r := anon.post("/api/auth/request-password-reset", map[string]any{"email": email})
			require.Equal(t, http.StatusOK, r.Status, r.Raw)
			require.Equal(t, true, r.Body["status"], "the same answer for known and unknown emails")
		}
		var token string
		require.Eventually(t, func() bool {
			token = resetToken(sys.Output(harness.Identity), a.email)
			return token != ""
		}, 10*time.Second, 50*time.Millisecond, "the dev mailer logs the reset link")

		requireCode(t, anon.post("/api/auth/reset-password", map[string]any{"token": "not-a-token", "newPassword": "whatever123"}), 400, "INVALID_TOKEN")
		r := anon.post("/api/auth/reset-password", map[string]any{"token": token, "newPassword": "reset and fresh"})
		require.Equal(t, http.StatusOK, r.Status, r.Raw)
		require.Equal(t, true, r.Body["status"])
		requireError(t, guardedProbe(a.c), http.StatusUnauthorized, "unauthorized")
		requireCode(t, anon.post("/api/auth/reset-password", map[string]any{"token": token, "newPassword": "reuse attempt"}), 400, "INVALID_TOKEN")
		require.Equal(t, http.StatusOK, anon.post("/api/auth/sign-in/email", map[string]any{"email": a.email, "password": "reset and fresh"}).Status)
	})

	t.Run("SignInAttemptsAreLimited", func(t *testing.T) {
		t.Parallel()
		a := signUp(t, sys, "brute")
		anon := newClient(t, sys)
		var last response
		for range 11 {
			last = anon.post("/api/auth/sign-in/email", map[string]any{"email": a.email, "password": "guess guess"})
		}
		requireCode(t, last, 429, "RATE_LIMITED")
	})

	// Identity is reachable without the gateway (it listens on every interface), where a
	// client writes X-Forwarded-For itself: that header must not pick the sign-in bucket.
	t.Run("SignInLimitIgnoresForwardedForStraightToIdentity", func(t *testing.T) {
		t.Parallel()
		a := signUp(t, sys, "directxff")
		direct := newClient(t, sys).with(func(c *client) { c.base = sys.URLs[harness.Identity] })
		var last response
		for i := range 11 {
			last = direct.with(func(c *client) { c.headers = map[string]string{"X-Forwarded-For": fmt.Sprintf("198.51.100.%d", i)} }).
				post("/api/auth/sign-in/email", map[string]any{"email": a.email, "password": "guess guess"})
		}
		requireCode(t, last, 429, "RATE_LIMITED")
	})

	t.Run("RateLimitPerPrincipal", func(t *testing.T) {
		t.Parallel()
		a := signUp(t, sys, "ratelimit")
		k1 := a.c.post("/api/auth/api-key/create", map[string]any{"name": "one"})
		k2 := a.c.post("/api/auth/api-key/create", map[string]any{"name": "two"})
		require.Equal(t, http.StatusOK, k1.Status, k1.Raw)
		require.Equal(t, http.StatusOK, k2.Status, k2.Raw)
		one := newClient(t, sys).with(func(c *client) { c.apiKey = k1.Body["key"].(string) })
		two := newClient(t, sys).with(func(c *client) { c.apiKey = k2.Body["key"].(string) })

		// The bucket holds 60 and refills one token a second, so the first 60 requests pass and a
		// refusal comes within one more request per second the loop took.
		start := time.Now()
		passed := 0
		var r response
		for range 120 {
			r = guardedProbe(one)
			if r.Status == http.StatusTooManyRequests {
				break
			}
			require.Equal(t, http.StatusNotFound, r.Status, "request %d: %s", passed+1, r.Raw)
			require.Equal(t, "60", r.Header.Get("RateLimit-Limit"))
			passed++
		}
		elapsed := time.Since(start)
		require.GreaterOrEqual(t, passed, 60)
		require.LessOrEqual(t, passed, 60+int(elapsed.Seconds())+1, "refilled faster than 60 a minute")
		requireError(t, r, http.StatusTooManyRequests, "rate_limited")
		require.Positive(t, r.Body["retryAfterMs"])
		require.NotEmpty(t, r.Header.Get("Retry-After"))
		require.Equal(t, "0", r.Header.Get("RateLimit-Remaining"))

		// Another key of the same organization has its own bucket, and so does the session.
		requireError(t, guardedProbe(two), http.StatusNotFound, "not_found")
		requireError(t, guardedProbe(a.c), http.StatusNotFound, "not_found")
	})
}

// TestBootstrap: /api/bootstrap opens only on an empty user store with SVC_BOOTSTRAP=1.
func TestBootstrap(t *testing.T) {
	t.Parallel()

	t.Run("Closed without the flag", func(t *testing.T) {
		t.Parallel()
		sys := startIdentitySystem(t, nil)
		r := newClient(t, sys).post("/api/bootstrap", map[string]any{"email": uniqueEmail("boot"), "password": "long enough"})
		requireError(t, r, http.StatusNotFound, "not_found")
	})

	t.Run("OpensOnceWithTheFlag", func(t *testing.T) {
		t.Parallel()
		sys := startIdentitySystem(t, map[string]string{"SVC_BOOTSTRAP": "1"})
		anon := newClient(t, sys)
		requireError(t, anon.get("/api/bootstrap"), http.StatusNotFound, "not_found")
		// Claiming the system is a mutation like any auth call: not from another site.
		body := map[string]any{"email": uniqueEmail("boot"), "password": "long enough"}
		requireCode(t, anon.with(func(c *client) { c.origin = "" }).post("/api/bootstrap", body), 403, "MISSING_OR_NULL_ORIGIN")
		requireCode(t, anon.with(func(c *client) { c.origin = "http://evil.test" }).post("/api/bootstrap", body), 403, "INVALID_ORIGIN")

		r := anon.post("/api/bootstrap", map[string]any{"email": uniqueEmail("boot"), "password": "long enough", "organizationName": "Acme"})
		require.Equal(t, http.StatusCreated, r.Status, r.Raw)
		require.Regexp(t, `^usr_`, obj(t, r.Body["user"])["id"])
		require.Equal(t, "Acme", obj(t, r.Body["organization"])["name"])
		key := obj(t, r.Body["apiKey"])
		require.Regexp(t, `^svc_[A-Za-z]{64}$`, key["key"])
		require.Equal(t, key["key"].(string)[:6], key["start"])

		byKey := newClient(t, sys).with(func(c *client) { c.apiKey = key["key"].(string) })
		requireError(t, guardedProbe(byKey), http.StatusNotFound, "not_found")
		byToken := newClient(t, sys).with(func(c *client) { c.token = r.Body["token"].(string) })
		requireError(t, guardedProbe(byToken), http.StatusNotFound, "not_found")

		// The store is no longer empty: closed for good.
		again := anon.post("/api/bootstrap", map[string]any{"email": uniqueEmail("boot2"), "password": "long enough"})
		requireError(t, again, http.StatusNotFound, "not_found")
	})
}

func sessionCookie(t *testing.T, h http.Header) string {
	t.Helper()
	for _, sc := range h.Values("Set-Cookie") {
		if strings.HasPrefix(sc, "svc.session_token=") {
			return strings.SplitN(sc, ";", 2)[0]
		}
	}
	t.Fatalf("no svc.session_token cookie in %v", h.Values("Set-Cookie"))
	return ""
}

var resetLink = regexp.MustCompile(`token=([A-Za-z0-9_\-]+)`) //nolint:gochecknoglobals // test helper

// resetToken finds the token of the newest reset link logged for email.
func resetToken(logs, email string) string {
	token := ""
	for _, line := range strings.Split(logs, "\n") {
		if strings.Contains(line, email) {
			if m := resetLink.FindStringSubmatch(line); m != nil {
				token = m[1]
			}
		}
	}
	return token
}

// TestScoping: a user of organization B gets 404 for A's resources, never 403, and keys only
// work for their own organization.
func TestScoping(t *testing.T) {
	t.Parallel()
	sys := startIdentitySystem(t, nil)
	a, b := signUp(t, sys, "scope-a"), signUp(t, sys, "scope-b")

	created := a.c.post("/api/workflows", map[string]any{"name": "a-private"})
	require.Equal(t, http.StatusCreated, created.Status, created.Raw)
	id := created.Body["id"].(string)
	require.Equal(t, http.StatusOK, a.c.get("/api/workflows/"+id).Status)

	requireError(t, b.c.get("/api/workflows/"+id), http.StatusNotFound, "not_found")
	requireError(t, b.c.post("/api/workflows/"+id+"/operations", map[string]any{"ops": []any{}}), http.StatusNotFound, "not_found")
	requireError(t, b.c.do("PATCH", "/api/workflows/"+id, map[string]any{"name": "stolen"}), http.StatusNotFound, "not_found")
	requireError(t, b.c.do("DELETE", "/api/workflows/"+id, nil), http.StatusNotFound, "not_found")
	list := b.c.get("/api/workflows")
	require.Equal(t, http.StatusOK, list.Status, list.Raw)
	require.NotContains(t, list.Raw, id)

	// B's API key is B's organization's: A's workflow stays invisible to it too.
	k := b.c.post("/api/auth/api-key/create", map[string]any{"name": "b-key"})
	require.Equal(t, http.StatusOK, k.Status, k.Raw)
	bKey := newClient(t, sys).with(func(c *client) { c.apiKey = k.Body["key"].(string) })
	requireError(t, bKey.get("/api/workflows/"+id), http.StatusNotFound, "not_found")

	// A still sees it, unchanged.
	got := a.c.get("/api/workflows/" + id)
	require.Equal(t, http.StatusOK, got.Status, got.Raw)
	require.Equal(t, "a-private", got.Body["name"])
}

// TestAuthLayerNeedsASession: key administration and session routes without credentials.
func TestAuthLayerNeedsASession(t *testing.T) {
	t.Parallel()
	sys := startIdentitySystem(t, nil)
	anon := newClient(t, sys)
	requireCode(t, anon.get("/api/auth/api-key/list"), 401, "UNAUTHORIZED")
	requireCode(t, anon.post("/api/auth/api-key/create", map[string]any{"name": "x"}), 401, "UNAUTHORIZED")
	requireCode(t, anon.post("/api/auth/organization/create", map[string]any{"name": "x", "slug": "x-slug"}), 401, "UNAUTHORIZED")
	s := anon.get("/api/auth/get-session")
	require.Equal(t, http.StatusOK, s.Status, s.Raw)
	require.Equal(t, "null", strings.TrimSpace(s.Raw))
	// Fail closed: with no keys stored, no key works.
	requireError(t, guardedProbe(anon.with(func(c *client) { c.apiKey = "svc_" + strings.Repeat("a", 64) })), http.StatusUnauthorized, "unauthorized")
}
