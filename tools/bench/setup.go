package main

import (
	"bytes"
	"context"
	"crypto/rand"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"strings"
	"sync"
	"time"

	"svc.dev/libs/internalauth"
)

// api makes the setup calls of a scenario, the ones that are not measured: one request at a
// time through its own client, each answer checked and decoded.
type api struct {
	client *http.Client
	base   string
	header http.Header // sent with every request (credentials, Origin)
}

func newAPI(base string, header http.Header) *api {
	return &api{client: &http.Client{Timeout: 30 * time.Second}, base: base, header: header}
}

// call sends method path with body as JSON (none when nil), fails unless the answer has status
// want, and decodes it into out (when not nil).
func (a *api) call(ctx context.Context, method, path string, body any, want int, out any) error {
	var rd io.Reader
	if body != nil {
		b, err := json.Marshal(body)
		if err != nil {
			return err
		}
		rd = bytes.NewReader(b)
	}
	req, err := http.NewRequestWithContext(ctx, method, a.base+path, rd)
	if err != nil {
		return err
	}
	for k, vs := range a.header {
		req.Header[k] = vs
	}
	if body != nil {
		req.Header.Set("Content-Type", "application/json")
	}
	resp, err := a.client.Do(req)
	if err != nil {
		return fmt.Errorf("%s %s: %w", method, path, err)
	}
	defer resp.Body.Close()
	raw, err := io.ReadAll(resp.Body)
	if err != nil {
		return fmt.Errorf("%s %s: %w", method, path, err)
	}
	if resp.StatusCode != want {
		return fmt.Errorf("%s %s: status %d, want %d: %s", method, path, resp.StatusCode, want, clip(string(raw), 300))
	}
	if out == nil {
		return nil
	}
	if err := json.Unmarshal(raw, out); err != nil {
		return fmt.Errorf("%s %s: decode %s: %w", method, path, clip(string(raw), 300), err)
	}
	return nil
}

// account is a user signed up for a scenario, with an API key of its personal organization:
// each scenario has its own, so their rate-limit buckets and workflows never meet.
type account struct {
	userID, email  string
	organizationID string
	keyID, key     string
}

// identity is what the gateway signs into the requests it forwards for this account's key.
func (a account) identity() internalauth.Identity {
	return internalauth.Identity{UserID: a.userID, Email: a.email, OrganizationID: a.organizationID,
		AuthMode: internalauth.ModeAPIKey, APIKeyID: a.keyID}
}

// signUp creates a user through the gateway (sign-up, with a trusted Origin), reads the
// organization sign-up made active, and creates an API key with the session.
func signUp(ctx context.Context, env Env, scenario string) (account, error) {
	var nonce [6]byte
	_, _ = rand.Read(nonce[:])
	email := fmt.Sprintf("bench-%s-%s@bench.test", scenario, hex.EncodeToString(nonce[:]))
	anon := newAPI(env.GatewayURL, http.Header{"Origin": {env.Origin}})
	var up struct {
		Token string `json:"token"`
		User  struct {
			ID string `json:"id"`
		} `json:"user"`
	}
	err := anon.call(ctx, http.MethodPost, "/api/auth/sign-up/email",
		map[string]string{"email": email, "password": "bench-password-" + hex.EncodeToString(nonce[:]), "name": "bench " + scenario},
		http.StatusOK, &up)
	if err != nil {
		return account{}, fmt.Errorf("sign up (is %s a trusted origin? SVC_TRUSTED_ORIGINS): %w", env.Origin, err)
	}
	session := newAPI(env.GatewayURL, http.Header{"Origin": {env.Origin}, "Authorization": {"Bearer " + up.Token}})
	var got struct {
		Session struct {
			ActiveOrganizationID string `json:"activeOrganizationId"`
		} `json:"session"`
	}
	if err := session.call(ctx, http.MethodGet, "/api/auth/get-session", nil, http.StatusOK, &got); err != nil {
		return account{}, err
	}
	var key struct {
		ID          string `json:"id"`
		Key         string `json:"key"`
		ReferenceID string `json:"referenceId"`
	}
	if err := session.call(ctx, http.MethodPost, "/api/auth/api-key/create", map[string]string{"name": "bench"}, http.StatusOK, &key); err != nil {
		return account{}, err
	}
	a := account{userID: up.User.ID, email: email, organizationID: got.Session.ActiveOrganizationID, keyID: key.ID, key: key.Key}
	if a.userID == "" || a.organizationID == "" || a.keyID == "" || a.key == "" {
		return account{}, fmt.Errorf("sign-up, get-session and api-key/create left something out: %+v", a)
	}
	if key.ReferenceID != a.organizationID {
		return account{}, fmt.Errorf("the key belongs to %s, the session's organization is %s", key.ReferenceID, a.organizationID)
	}
	return a, nil
}

// keyHeader authenticates a request through the gateway with the account's API key.
func (a account) keyHeader() http.Header {
	return http.Header{"X-Api-Key": {a.key}}
}

// forEach runs f for 0..n-1 on a few workers and returns the first error; the others stop
// picking up work once one failed.
func forEach(ctx context.Context, n, workers int, f func(ctx context.Context, i int) error) error {
	ctx, cancel := context.WithCancelCause(ctx)
	defer cancel(nil)
	next := make(chan int)
	var wg sync.WaitGroup
	for range workers {
		wg.Go(func() {
			for i := range next {
				if ctx.Err() != nil {
					continue // drain what the feeder already handed over
				}
				if err := f(ctx, i); err != nil {
					cancel(err)
				}
			}
		})
	}
feed:
	for i := range n {
		select {
		case next <- i:
		case <-ctx.Done():
			break feed
		}
	}
	close(next)
	wg.Wait()
	return context.Cause(ctx) // the first failure, the parent's end, or nil
}

// clip shortens s to at most n bytes for a message.
func clip(s string, n int) string {
	s = strings.TrimSpace(s)
	if len(s) <= n {
		return s
	}
	return s[:n] + "…"
}
