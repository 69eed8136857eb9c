package web_test

import (
	"context"
	"errors"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	sdktrace "go.opentelemetry.io/otel/sdk/trace"

	"svc.dev/libs/telemetry"
	"svc.dev/libs/web"
)

func handler(t *testing.T) http.Handler {
	t.Helper()
	log := slog.New(slog.DiscardHandler)
	r := web.NewRouter()
	rs := web.Responder{Log: log}
	r.Handle("/things", rs.Wrap(func(w http.ResponseWriter, r *http.Request) error {
		var in struct {
			Name string            `json:"name"`
			Ops  []struct{ N int } `json:"ops"`
		}
		if err := web.Decode(r, &in); err != nil {
			return err
		}
		web.WriteJSON(w, http.StatusCreated, in)
		return nil
	})).Methods(http.MethodPost)
	r.Handle("/boom", http.HandlerFunc(func(http.ResponseWriter, *http.Request) { panic("boom") }))
	r.Handle("/ready", web.Ready(time.Second, map[string]web.Check{
		"postgres": func(context.Context) error { return nil },
		"redis":    func(context.Context) error { return errors.New("dial tcp: refused") },
	}))
	tel := telemetry.NewWithProvider(sdktrace.NewTracerProvider())
	return web.Chain(r, web.Standard(log, tel, "test")...)
}

func do(t *testing.T, h http.Handler, method, path, body string, hdr ...string) *httptest.ResponseRecorder {
	t.Helper()
	req := httptest.NewRequest(method, path, strings.NewReader(body))
	for i := 0; i+1 < len(hdr); i += 2 {
		req.Header.Set(hdr[i], hdr[i+1])
	}
	rec := httptest.NewRecorder()
	h.ServeHTTP(rec, req)
	return rec
}

func TestChain(t *testing.T) {
	t.Parallel()
	h := handler(t)

	for _, tc := range []struct {
		name, method, path, body string
		status                   int
		want                     string
	}{
		{"Created", "POST", "/things", `{"name":"a"}`, 201, `{"name":"a","ops":null}`},
		{"NotJSON", "POST", "/things", `{"name":`, 400, `{"error":"invalid_body","message":"body is not valid JSON","issues":[{"path":"","message":"body is not valid JSON"}]}`},
		{"WrongType", "POST", "/things", `{"ops":[{"N":"x"}]}`, 400, `{"error":"invalid_body","message":"must be a number, not string","issues":[{"path":"/ops/0/N","message":"must be a number, not string"}]}`},
		{"LaterElement", "POST", "/things", `{"name":"a","ops":[{"N":1},{"N":2},{"N":[true]}]}`, 400, `{"error":"invalid_body","message":"must be a number, not array","issues":[{"path":"/ops/2/N","message":"must be a number, not array"}]}`},
		{"UnknownMember", "POST", "/things", `{"nam":"a"}`, 400, `{"error":"invalid_body","message":"unknown member nam; did you mean \"name\"?","issues":[{"path":"/nam","message":"unknown member nam; did you mean \"name\"?","did_you_mean":"name"}]}`},
		{"TwoValues", "POST", "/things", `{} {}`, 400, `{"error":"invalid_body","message":"body must hold exactly one JSON value","issues":[{"path":"","message":"body must hold exactly one JSON value"}]}`},
		{"Unknown", "GET", "/nope", ``, 404, `{"error":"not_found"}`},
		{"WrongMethod", "GET", "/things", ``, 405, `{"error":"method_not_allowed"}`},
		{"Panic", "GET", "/boom", ``, 500, `{"error":"internal"}`},
		{"ReadyNamesTheFailure", "GET", "/ready", ``, 503, `{"status":"unavailable","checks":{"postgres":"ok","redis":"unavailable"}}`},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			rec := do(t, h, tc.method, tc.path, tc.body)
			require.Equal(t, tc.status, rec.Code)
			require.JSONEq(t, tc.want, rec.Body.String())
			require.NotEmpty(t, rec.Header().Get(web.RequestIDHeader))
		})
	}

	t.Run("BodyOverLimit", func(t *testing.T) {
		t.Parallel()
		big := `{"name":"` + strings.Repeat("x", web.MaxBodyBytes) + `"}`
		rec := do(t, h, "POST", "/things", big)
		require.Equal(t, http.StatusRequestEntityTooLarge, rec.Code)
		require.Contains(t, rec.Body.String(), `"error":"payload_too_large"`)

		// Without a Content-Length the limit is hit while reading.
		req := httptest.NewRequest("POST", "/things", strings.NewReader(big))
		req.ContentLength = -1
		rec = httptest.NewRecorder()
		h.ServeHTTP(rec, req)
		require.Equal(t, http.StatusRequestEntityTooLarge, rec.Code)
	})

	t.Run("RequestIDEchoed", func(t *testing.T) {
		t.Parallel()
		rec := do(t, h, "GET", "/nope", "", web.RequestIDHeader, "abc-123")
		require.Equal(t, "abc-123", rec.Header().Get(web.RequestIDHeader))
		rec = do(t, h, "GET", "/nope", "", web.RequestIDHeader, "bad id with spaces")
		require.NotEqual(t, "bad id with spaces", rec.Header().Get(web.RequestIDHeader))
	})
}

func FuzzDecode(f *testing.F) {
	f.Add([]byte(`{"ops":[{"N":1},{"N":"x"}]}`))
	f.Add([]byte(`[[[{"a":{"b":[1,2,{"c":"d"}]}}]]]`))
	f.Add([]byte(`{"name":1}`))
	f.Fuzz(func(t *testing.T, body []byte) {
		var v struct {
			Name string            `json:"name"`
			Ops  []struct{ N int } `json:"ops"`
		}
		err := web.DecodeBytes(body, &v) // must never panic, whatever the body
		_ = err
	})
}

func TestReadyWithOptional(t *testing.T) {
	t.Parallel()
	ok := func(context.Context) error { return nil }
	down := func(context.Context) error { return errors.New("refused") }
	for _, tc := range []struct {
		name               string
		required, optional map[string]web.Check
		status             int
		want               string
	}{
		{"AllUp", map[string]web.Check{"identity": ok}, map[string]web.Check{"redis": ok}, 200, `{"status":"ok","checks":{"identity":"ok","redis":"ok"}}`},
		{"OptionalDown", map[string]web.Check{"identity": ok}, map[string]web.Check{"redis": down}, 200, `{"status":"degraded","checks":{"identity":"ok","redis":"unavailable"}}`},
		{"RequiredDown", map[string]web.Check{"identity": down}, map[string]web.Check{"redis": down}, 503, `{"status":"unavailable","checks":{"identity":"unavailable","redis":"unavailable"}}`},
	} {
		rec := httptest.NewRecorder()
		web.ReadyWithOptional(time.Second, tc.required, tc.optional).ServeHTTP(rec, httptest.NewRequest("GET", "/ready", nil))
		require.Equal(t, tc.status, rec.Code, tc.name)
		require.JSONEq(t, tc.want, rec.Body.String(), tc.name)
	}
}
