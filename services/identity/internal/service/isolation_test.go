package service_test

import (
	"fmt"
	"net/http"
	"sync"
	"testing"

	"github.com/stretchr/testify/require"

	"svc.dev/libs/wire"
	"svc.dev/services/identity/internal/domain/org"
)

// Issue 21: an invitation id is a bearer secret and emails are never verified, so whoever signs
// up with an invitee's address could try ids. Accept attempts are limited per user and, apart,
// per client address, as sign-in's are.
func TestAcceptInvitationAttemptsAreLimited(t *testing.T) {
	t.Parallel()
	b := setup(t, nil)
	guess := func(a account, ip string) response {
		t.Helper()
		c := b.viaGateway(t, ip, "Authorization", "Bearer "+a.token)
		return c.post("/api/auth/organization/accept-invitation", map[string]any{"invitationId": wire.NewID(wire.Invitation)})
	}

	// Per user: ten guesses, then 429 — from any address.
	mallory := b.signUp(t, "mallory")
	for range 10 {
		requireCode(t, guess(mallory, "198.51.100.20"), http.StatusBadRequest, "INVITATION_NOT_FOUND")
	}
	r := guess(mallory, "198.51.100.21")
	requireCode(t, r, http.StatusTooManyRequests, "RATE_LIMITED")
	require.NotEmpty(t, r.Header.Get("Retry-After"))
	require.Positive(t, r.Body["retryAfterMs"])

	// Per address: a second account from the first address finds its budget spent; the same
	// account elsewhere does not.
	sybil := b.signUp(t, "sybil")
	requireCode(t, guess(sybil, "198.51.100.20"), http.StatusTooManyRequests, "RATE_LIMITED")
	requireCode(t, guess(sybil, "198.51.100.22"), http.StatusBadRequest, "INVITATION_NOT_FOUND")

	// A malformed id costs nothing: no lookup and no token (it is refused before the limit).
	requireCode(t, b.viaGateway(t, "198.51.100.20", "Authorization", "Bearer "+mallory.token).
		post("/api/auth/organization/accept-invitation", map[string]any{"invitationId": "inv_nope"}), http.StatusBadRequest, "INVITATION_NOT_FOUND")
}

// Issue 21: the gateway's caps are per (organization, principal), so organizations and API
// keys made without end would multiply them. Past a ceiling: 403, and concurrent creates
// never pass one together.
func TestCeilings(t *testing.T) {
	t.Parallel()
	b := setup(t, map[string]string{
		"SVC_MAX_ORGANIZATIONS_PER_USER": "3",
		"SVC_MAX_API_KEYS_PER_ORG":       "2",
		"SVC_MAX_API_KEYS_PER_USER":      "3",
	})
	const n = 8
	race := func(do func(i int) response) map[int]int {
		statuses := make([]int, n)
		var wg sync.WaitGroup
		for i := range n {
			wg.Go(func() { statuses[i] = do(i).Status })
		}
		wg.Wait()
		count := map[int]int{}
		for _, s := range statuses {
			count[s]++
		}
		return count
	}

	t.Run("OrganizationsPerUser", func(t *testing.T) {
		t.Parallel()
		a := b.signUp(t, "orgs")
		got := race(func(i int) response {
			return a.c.post("/api/auth/organization/create", map[string]any{"name": "Org", "slug": fmt.Sprintf("ceiling-%s-%d", a.userID[len(a.userID)-8:], i)})
		})
		require.Equal(t, map[int]int{http.StatusOK: 2, http.StatusForbidden: n - 2}, got, "sign-up's personal organization counts")
		requireCode(t, a.c.post("/api/auth/organization/create", map[string]any{"name": "Org", "slug": "ceiling-" + a.userID[len(a.userID)-8:]}),
			http.StatusForbidden, "YOU_HAVE_REACHED_THE_MAXIMUM_NUMBER_OF_ORGANIZATIONS")
		require.Len(t, arr(t, a.c.get("/api/auth/organization/list").Raw), 3)

		// Accepting an invitation is a membership too.
		host := b.signUp(t, "host")
		inv := host.c.post("/api/auth/organization/invite-member", map[string]any{"email": a.email, "role": "member"})
		require.Equal(t, http.StatusOK, inv.Status, inv.Raw)
		requireCode(t, a.c.post("/api/auth/organization/accept-invitation", map[string]any{"invitationId": inv.Body["id"]}),
			http.StatusForbidden, "YOU_HAVE_REACHED_THE_MAXIMUM_NUMBER_OF_ORGANIZATIONS")
		members := host.c.get("/api/auth/organization/list-members")
		require.InDelta(t, 1, members.Body["total"], 0, members.Raw)
	})

	t.Run("OpenInvitationsPerOrganization", func(t *testing.T) {
		t.Parallel()
		a := b.signUp(t, "inviter")
		invite := func(email string) response {
			return a.c.post("/api/auth/organization/invite-member", map[string]any{"email": email, "role": "member"})
		}
		for i := range org.MaxOpenInvitations {
			r := invite(fmt.Sprintf("guest%d@example.com", i))
			require.Equal(t, http.StatusOK, r.Status, r.Raw)
		}
		requireCode(t, invite("one-more@example.com"), http.StatusForbidden, "INVITATION_LIMIT_REACHED")
	})

	t.Run("APIKeys", func(t *testing.T) {
		t.Parallel()
		a := b.signUp(t, "keys")
		create := func(i int) response {
			return a.c.post("/api/auth/api-key/create", map[string]any{"name": fmt.Sprintf("k%d", i)})
		}
		require.Equal(t, map[int]int{http.StatusOK: 2, http.StatusForbidden: n - 2}, race(create), "per organization")
		r := create(0)
		requireCode(t, r, http.StatusForbidden, "YOU_HAVE_REACHED_THE_MAXIMUM_NUMBER_OF_API_KEYS")
		require.Contains(t, r.Body["message"], "organization")

		// A second organization has room, but Ann has one key left in all.
		second := a.c.post("/api/auth/organization/create", map[string]any{"name": "Second", "slug": "second-" + a.userID[len(a.userID)-8:]})
		require.Equal(t, http.StatusOK, second.Status, second.Raw)
		require.Equal(t, map[int]int{http.StatusOK: 1, http.StatusForbidden: n - 1}, race(create), "per user")
		r = create(0)
		requireCode(t, r, http.StatusForbidden, "YOU_HAVE_REACHED_THE_MAXIMUM_NUMBER_OF_API_KEYS")
		require.Contains(t, r.Body["message"], "You have")

		// Revoking makes room again.
		keys := a.c.get("/api/auth/api-key/list")
		require.Equal(t, http.StatusOK, keys.Status, keys.Raw)
		id := obj(t, keys.Body["apiKeys"].([]any)[0])["id"]
		require.Equal(t, http.StatusOK, a.c.post("/api/auth/api-key/delete", map[string]any{"keyId": id}).Status)
		require.Equal(t, http.StatusOK, create(0).Status)
	})
}
