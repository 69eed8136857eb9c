package route_test

import (
	"context"
	"encoding/json"
	"errors"
	"net/http"
	"strconv"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"svc.dev/services/webhook-ingress/internal/domain/route"
	"svc.dev/services/webhook-ingress/internal/domain/signature"
)

var target = route.Target{Organization: "org_x", WorkflowName: "wf"} //nolint:gochecknoglobals // test fixture

func request(body string, contentType string, hdr ...string) route.Request {
	h := http.Header{}
	for i := 0; i+1 < len(hdr); i += 2 {
		h.Set(hdr[i], hdr[i+1])
	}
	req := route.Request{Body: map[string]any{}, Headers: h, RawBody: []byte(body), Params: map[string]string{}, ContentType: contentType}
	if contentType == "application/json" {
		var v any
		if err := json.Unmarshal([]byte(body), &v); err == nil {
			req.Body = v
		}
	}
	return req
}

func requireKind(t *testing.T, err error, kind string) {
	t.Helper()
	var (
		sig *route.SignatureError
		rej *route.RejectedError
	)
	switch kind {
	case "signature":
		require.True(t, errors.As(err, &sig), "want a signature error, got %v", err)
	case "rejected":
		require.True(t, errors.As(err, &rej), "want a rejection, got %v", err)
	default:
		require.NoError(t, err)
	}
}

func TestGitHub(t *testing.T) {
	t.Parallel()
	secret := []byte("gh-secret")
	r := route.GitHub(secret, target)
	require.True(t, r.SignedBodyOnly, "GitHub signs the body alone: its digest is a second key")
	body := `{"zen":"Keep it logically awesome.","hook_id":1}`
	sig := signature.SignGitHub(secret, []byte(body))

	for _, tc := range []struct {
		name string
		req  route.Request
		want string
	}{
		{"Valid", request(body, "application/json", "X-Hub-Signature-256", sig, "X-GitHub-Event", "ping", "X-GitHub-Delivery", "d1"), ""},
		{"NoSignature", request(body, "application/json", "X-GitHub-Event", "ping", "X-GitHub-Delivery", "d1"), "signature"},
		{"WrongSignature", request(body+" ", "application/json", "X-Hub-Signature-256", sig, "X-GitHub-Event", "ping"), "signature"},
		// Not JSON: the body is the empty object (docs/API.md), and the delivery still dispatches.
		{"FormEncoded", request(body, "application/x-www-form-urlencoded", "X-Hub-Signature-256", sig, "X-GitHub-Event", "ping", "X-GitHub-Delivery", "d1"), ""},
		{"NoEvent", request(body, "application/json", "X-Hub-Signature-256", sig), "rejected"},
		// The signature is checked first: an unsigned request learns nothing about the rest.
		{"UnsignedAndFormEncoded", request(body, "text/plain"), "signature"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			in, err := r.FromRequest(context.Background(), tc.req)
			requireKind(t, err, tc.want)
			if tc.want == "" {
				require.Equal(t, map[string]any{"event": "ping", "delivery": "d1", "payload": tc.req.Body}, in)
			}
		})
	}

	key, err := r.IdempotencyKey(request(body, "application/json", "X-GitHub-Delivery", "72d3162e"))
	require.NoError(t, err)
	require.Equal(t, "72d3162e", key)
	_, err = r.IdempotencyKey(request(body, "application/json"))
	requireKind(t, err, "rejected")
	_, err = r.IdempotencyKey(request(body, "application/json", "X-GitHub-Delivery", "d\xff"))
	requireKind(t, err, "rejected")
}

func TestStandardWebhooks(t *testing.T) {
	t.Parallel()
	key, err := signature.ParseStandardSecret("whsec_MfKQ9r8GKYqrTwjUPD8ILPZIo2LaLaSw")
	require.NoError(t, err)
	now := time.Unix(1_800_000_000, 0)
	r := route.StandardWebhooks(key, target, func() time.Time { return now })
	body := `{"type":"invoice.paid","data":{"id":7}}`
	signed := func(id string, at time.Time, b string, contentType string) route.Request {
		ts := strconv.FormatInt(at.Unix(), 10)
		req := request(b, contentType, "webhook-id", id, "webhook-timestamp", ts,
			"webhook-signature", signature.SignStandard(key, id, ts, []byte(b)))
		req.Params = map[string]string{"source": "billing"}
		return req
	}

	in, err := r.FromRequest(context.Background(), signed("msg_1", now, body, "application/json"))
	require.NoError(t, err)
	require.Equal(t, map[string]any{"source": "billing", "event": map[string]any{"type": "invoice.paid", "data": map[string]any{"id": float64(7)}}}, in)

	_, err = r.FromRequest(context.Background(), signed("msg_1", now.Add(-6*time.Minute), body, "application/json"))
	requireKind(t, err, "signature")
	require.Contains(t, err.Error(), "5 minutes")
	// A signed text/plain delivery dispatches with the empty object as its event (docs/API.md:
	// only application/json bodies are parsed), its signature still checked over the raw bytes.
	in, err = r.FromRequest(context.Background(), signed("msg_1", now, body, "text/plain"))
	require.NoError(t, err)
	require.Equal(t, map[string]any{"source": "billing", "event": map[string]any{}}, in)
	tampered := signed("msg_1", now, body, "text/plain")
	tampered.RawBody = []byte(body + " ")
	_, err = r.FromRequest(context.Background(), tampered)
	requireKind(t, err, "signature")
	forged := signed("msg_1", now, body, "application/json")
	forged.Headers.Set("webhook-id", "msg_2")
	_, err = r.FromRequest(context.Background(), forged)
	requireKind(t, err, "signature")

	k, err := r.IdempotencyKey(signed("msg_1", now, body, "application/json"))
	require.NoError(t, err)
	require.Equal(t, "msg_1", k)
}

// The run inputs the shipped routes build satisfy their own schemas, and bodies of the wrong
// shape do not.
func TestSchemas(t *testing.T) {
	t.Parallel()
	gh, err := route.CompileSchema([]byte(route.GitHubInputSchema))
	require.NoError(t, err)
	std, err := route.CompileSchema([]byte(route.StandardInputSchema))
	require.NoError(t, err)
	require.NoError(t, gh.Validate(map[string]any{"event": "push", "delivery": "d", "payload": map[string]any{}}))
	require.Error(t, gh.Validate(map[string]any{"event": "push", "delivery": "d", "payload": []any{}}))
	require.NoError(t, std.Validate(map[string]any{"source": "billing", "event": map[string]any{}}))
	require.Error(t, std.Validate(map[string]any{"source": "billing", "event": "text"}))
	require.Error(t, std.Validate(map[string]any{"source": "a/b", "event": map[string]any{}}))
}
