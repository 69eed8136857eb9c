package e2e

import (
	"net/http"
	"regexp"
	"testing"

	"github.com/stretchr/testify/require"

	"svc.dev/e2e/harness"
)

// TestConsoleRetention drives the run retention part of the console (console/retention.mjs,
// Debian's chromium through playwright-core) against a system of its own. An owner opens the
// organization's settings: the period in effect is the server's (30 days), with the server's
// maximum and no period of the organization's own. Periods the API refuses are said next to
// the field in words; 36h and then 7d are set and shown in effect, and the API agrees. The
// page of a finished run says how long runs are kept and when this one is deleted (its
// finishedAt plus the period, in the console's date format); after a reset to the server's
// period it says so too. A member invited into the organization sees the settings read-only,
// without a field, and sends no change. axe-core checks each page (no serious or critical
// violation).
func TestConsoleRetention(t *testing.T) {
	t.Parallel()
	browser, modules := consoleBrowser(t)
	sys := harness.Start(t, harness.Options{TrustGateway: true, Env: map[string]string{"SVC_TRUSTED_ORIGINS": testOrigin}})

	owner, member := signUp(t, sys, "retention-owner"), signUp(t, sys, "retention-member")
	orgs := arr(t, decodeAny(t, owner.c.get("/api/auth/organization/list").Raw))
	require.Len(t, orgs, 1)
	org := obj(t, orgs[0])
	inv := owner.c.post("/api/auth/organization/invite-member", map[string]any{"email": member.email, "role": "member"})
	require.Equal(t, http.StatusOK, inv.Status, inv.Raw)
	acc := member.c.post("/api/auth/organization/accept-invitation", map[string]any{"invitationId": inv.Body["id"]})
	require.Equal(t, http.StatusOK, acc.Status, acc.Raw)
	require.Equal(t, "member", obj(t, acc.Body["member"])["role"], acc.Raw)

	// A finished run of the organization, for the run page.
	u := &runsUser{t: t, sys: sys, c: owner.c}
	wf := u.workflow("kept-for-a-while", map[string]any{
		"blocks": []map[string]any{{"block_id": "start", "type": "trigger.manual"}, {"block_id": "note", "type": "log", "params": map[string]any{"message": "done"}}},
		"edges":  []map[string]any{{"block_id": "start", "target_block_id": "note"}},
	})
	runID := u.startRun(wf, map[string]any{"input": map[string]any{}})
	u.waitStatus(runID, "completed")

	// The organization starts on the server's period, and the script leaves it there.
	retention := func() map[string]any {
		r := owner.c.get("/api/organizations/current/retention")
		require.Equal(t, http.StatusOK, r.Status, r.Raw)
		return r.Body
	}
	require.Nil(t, retention()["runRetention"])

	out := runConsoleScript(t, "retention.mjs", modules, "BASE_URL="+sys.BaseURL, "CHROMIUM="+browser,
		"OWNER_EMAIL="+owner.email, "OWNER_PASSWORD="+owner.password,
		"MEMBER_EMAIL="+member.email, "MEMBER_PASSWORD="+member.password,
		"ORG_SLUG="+org["slug"].(string), "RUN_ID="+runID)
	for _, m := range regexp.MustCompile(`(?m)^(shown: |a11y: ).*$`).FindAllString(out, -1) {
		t.Log(m)
	}
	require.Contains(t, out, "a11y: settings, read-only for a member: no serious or critical violation", "axe checked the member's page")

	got := retention()
	require.Nil(t, got["runRetention"], got)
	require.Equal(t, "720h", got["effectiveRetention"], got)
}
