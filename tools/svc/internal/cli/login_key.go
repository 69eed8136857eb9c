package cli

import (
	"context"
	"fmt"

	api "svc.dev/clients/apiclient"
	"svc.dev/tools/svc/internal/credential"
)

// loginKey is the API key a login saves: the one already saved for apiURL when it belongs to
// the same user and organization and the API still accepts it (reused), else a new one named
// after this host. Each login used to mint a key, and keys piled up on the server.
func (a *app) loginKey(ctx context.Context, c *api.Client, store *credential.Store, apiURL string, sess *api.Session, org *api.Organization) (*api.NewAPIKey, bool, error) {
	if prev, ok := a.workingKey(ctx, c, store, apiURL, sess.User.ID, org.ID); ok {
		key := &api.NewAPIKey{APIKey: api.APIKey{ID: prev.APIKeyID}, Key: prev.APIKey, ReferenceID: org.ID}
		// The name and start, for the output; the listing needs an owner or admin, so a
		// member's login keeps the key without them.
		if keys, err := c.ListAPIKeys(ctx, sess.Cookie); err == nil {
			for _, k := range keys {
				if k.ID == prev.APIKeyID {
					key.APIKey = k
				}
			}
		}
		return key, true, nil
	}
	host, err := a.env.Hostname()
	if err != nil || host == "" {
		host = "svc-cli"
	}
	key, _, err := c.CreateAPIKey(ctx, sess.Cookie, host)
	if err != nil {
		return nil, false, fmt.Errorf("mint an API key: %w", err)
	}
	return key, false, nil
}

// workingKey is the entry saved for apiURL when its key is for userID in orgID and one cheap
// authenticated call with it succeeds. Any failure (revoked, expired, another organization,
// the API unsure) means a new key: a login must end with a key that works.
func (a *app) workingKey(ctx context.Context, c *api.Client, store *credential.Store, apiURL, userID, orgID string) (credential.Session, bool) {
	prev, ok, err := store.Get(apiURL)
	if err != nil || !ok || prev.APIKey == "" || prev.APIKeyID == "" {
		return credential.Session{}, false
	}
	if prev.UserID != userID || prev.OrganizationID != orgID {
		return credential.Session{}, false
	}
	if err := c.CheckAPIKey(ctx, prev.APIKey); err != nil {
		return credential.Session{}, false
	}
	return prev, true
}

// revokeSaved revokes the key saved for apiURL with the saved session (keys are managed with
// a session), then signs that session out. A key the server no longer has counts
// as revoked. It returns the key's id, "" when nothing is saved for apiURL.
func (a *app) revokeSaved(ctx context.Context, store *credential.Store, apiURL string) (string, error) {
	s, ok, err := store.Get(apiURL)
	if err != nil || !ok {
		return "", err
	}
	c, err := a.client(apiURL)
	if err != nil {
		return "", err
	}
	if err := c.RevokeAPIKey(ctx, s.SessionCookie, s.APIKeyID); err != nil && !api.IsCode(err, "KEY_NOT_FOUND") {
		if api.IsCode(err, "UNAUTHORIZED") || api.IsCode(err, "unauthorized") {
			return "", &ExitError{Code: ExitFailure, Msg: fmt.Sprintf("revoke API key %s: %v: the saved session has expired or was revoked; "+
				"run 'svc login' (it keeps the same key while it works), then 'svc logout --revoke' again. Nothing was removed.", s.APIKeyID, err)}
		}
		return "", fmt.Errorf("revoke API key %s (nothing was removed): %w", s.APIKeyID, err)
	}
	// The key is gone; the session is ended as well. Failing that is not worth keeping an
	// entry whose key no longer works.
	_ = c.SignOut(ctx, s.SessionCookie)
	return s.APIKeyID, nil
}
