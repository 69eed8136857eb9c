package e2e

import (
	"encoding/json"
	"net/url"
	"os"
	"strings"
	"testing"

	"svc.dev/e2e/harness"
)

// environ is the test's environment without settings that would point a service elsewhere.
func environ() []string {
	var out []string
	for _, kv := range os.Environ() {
		if !strings.HasPrefix(kv, "SVC_") && !strings.HasPrefix(kv, "OTEL_") {
			out = append(out, kv)
		}
	}
	return out
}

// listenAddr is an address for a process the test starts (see harness.FreeAddr: a port a
// parallel test or an outbound connection cannot take in between).
func listenAddr(t *testing.T) string {
	t.Helper()
	return harness.FreeAddr(t)
}

func hostPort(t *testing.T, raw string) string {
	t.Helper()
	u, err := url.Parse(raw)
	if err != nil {
		t.Fatal(err)
	}
	if u.Port() == "" {
		return u.Hostname() + ":5432"
	}
	return u.Host
}

func replaceHost(t *testing.T, raw, hostport string) string {
	t.Helper()
	u, err := url.Parse(raw)
	if err != nil {
		t.Fatal(err)
	}
	u.Host = hostport
	return u.String()
}

func decodeAny(t *testing.T, raw string) any {
	t.Helper()
	var v any
	if err := json.Unmarshal([]byte(raw), &v); err != nil {
		t.Fatalf("not JSON: %v: %s", err, raw)
	}
	return v
}

func unescape(t *testing.T, s string) string {
	t.Helper()
	u, err := url.QueryUnescape(s)
	if err != nil {
		t.Fatal(err)
	}
	return u
}
