package main

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"strings"
	"sync"
	"time"

	"svc.dev/clients/apiclient"
	"svc.dev/libs/internalauth"
)

// setupTimeout bounds each request of a scenario's own client.
const setupTimeout = 30 * time.Second

// newClient is bench's client of the public API through the gateway, for a scenario's setup
// calls and the requests it times one at a time: apiclient over hc (nil: a client of its own
// with setupTimeout), sending env's Origin, which identity trusts, and API keys in x-api-key,
// as the generator's requests do. An answer outside 2xx is an *apiclient.Error.
func newClient(env Env, hc *http.Client) (*apiclient.Client, error) {
	if hc == nil {
		hc = &http.Client{Timeout: setupTimeout}
	}
	c, err := apiclient.NewClient(env.GatewayURL, hc, "")
	if err != nil {
		return nil, err
	}
	if env.Origin != "" {
		c = c.WithOrigin(env.Origin)
	}
	return c.WithAPIKeyHeader(), nil
}

// signUpKeyed signs up as signUp does and returns the account with a client acting with its
// API key, what most scenarios start from.
func signUpKeyed(ctx context.Context, env Env, scenario string) (account, *apiclient.Client, error) {
	acct, err := signUp(ctx, env, scenario)
	if err != nil {
		return account{}, nil, err
	}
	keyed, err := keyedClient(env, acct, nil)
	if err != nil {
		return account{}, nil, err
	}
	return acct, keyed, nil
}

// keyedClient is newClient acting with acct's API key: its domain calls are made with an
// empty key.
func keyedClient(env Env, acct account, hc *http.Client) (*apiclient.Client, error) {
	c, err := newClient(env, hc)
	if err != nil {
		return nil, err
	}
	return c.WithAuth(apiclient.Auth{APIKey: acct.key}), nil
}

// into decodes an answer of the API into a T, or passes the call's error on.
func into[T any](raw json.RawMessage, err error) (T, error) {
	if err != nil {
		var zero T
		return zero, err
	}
	return apiclient.Decode[T](raw)
}

// newWorkflow is the part of a workflow's creation bench reads.
type newWorkflow struct {
	ID string `json:"id"`
}

// createWorkflow creates a workflow.
func createWorkflow(ctx context.Context, keyed *apiclient.Client, req apiclient.CreateWorkflowRequest) (newWorkflow, error) {
	return into[newWorkflow](keyed.CreateWorkflow(ctx, "", req))
}

// applyOps sends one batch of operations to workflow id (no If-Match).
func applyOps(ctx context.Context, keyed *apiclient.Client, id string, ops []map[string]any) (patchAnswer, error) {
	raw, err := json.Marshal(ops)
	if err != nil {
		return patchAnswer{}, err
	}
	return into[patchAnswer](keyed.ApplyOps(ctx, "", id, raw, 0))
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
	anon, err := newClient(env, nil)
	if err != nil {
		return account{}, err
	}
	s, err := anon.SignUp(ctx, email, "bench-password-"+hex.EncodeToString(nonce[:]), "bench "+scenario)
	if err != nil {
		return account{}, fmt.Errorf("sign up (is %s a trusted origin? SVC_TRUSTED_ORIGINS): %w", env.Origin, err)
	}
	got, err := anon.GetSession(ctx, s.Cookie)
	if err != nil {
		return account{}, fmt.Errorf("get-session: %w", err)
	}
	if got == nil {
		return account{}, errors.New("get-session: the session sign-up made is not valid")
	}
	key, _, err := anon.CreateAPIKey(ctx, s.Cookie, "bench")
	if err != nil {
		return account{}, fmt.Errorf("api-key/create: %w", err)
	}
	a := account{userID: s.User.ID, email: email, keyID: key.ID, key: key.Key}
	if org := got.Session.ActiveOrganizationID; org != nil {
		a.organizationID = *org
	}
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

// errNotWithin is pollUntil's error when limit passed first.
var errNotWithin = errors.New("not within the limit")

// pollUntil calls done every every until it says so, fails, or limit passes (errNotWithin).
func pollUntil(ctx context.Context, every, limit time.Duration, done func() (bool, error)) error {
	deadline := time.Now().Add(limit)
	for {
		ok, err := done()
		if err != nil || ok {
			return err
		}
		if time.Now().After(deadline) {
			return fmt.Errorf("%w (%s)", errNotWithin, limit)
		}
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-time.After(every):
		}
	}
}
