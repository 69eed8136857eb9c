package fuzz

import (
	"net"
	"net/http"

	"svc.dev/e2e/harness"
)

// rateLimitShape checks 429s, which the main gateway's huge limit never gives: a second
// gateway of the same system, with a bucket of 3 a minute, and a principal used only here.
func (f *fuzzer) rateLimitShape() {
	addr, admin := freeAddr(f), freeAddr(f)
	f.sys.Run(f.t, harness.Gateway, map[string]string{
		"SVC_PUBLIC_ADDR": addr, "SVC_GATEWAY_ADMIN_ADDR": admin, "SVC_RATE_LIMIT_PER_MINUTE": "3",
	})
	k, _ := f.api(http.MethodPost, "/api/auth/api-key/create", bearer(f.fx.token), map[string]any{"name": "fz-429"}, http.StatusOK)
	key := str(k, "key")
	before := f.count429.Load()
	ops := []string{"/api/connectors", "/api/workflows?limit=1", "/api/runs?limit=1", "/api/schedules"}
	for i := range 10 {
		req := &request{Kind: "rate-limit", Method: http.MethodGet, Path: ops[i%len(ops)], Header: http.Header{}, base: "http://" + addr}
		req.Op = f.opFor(req.Method, req.Path)
		req.Header.Set("X-Api-Key", key)
		res := f.send(req)
		if res.Err == nil && res.Header.Get("RateLimit-Limit") != "3" {
			f.fail("headers", "RateLimit-Limit is not the bucket's capacity 3: "+res.Header.Get("RateLimit-Limit"), req, res)
		}
	}
	if got := f.count429.Load() - before; got < 5 {
		f.fail("429-shape", "10 requests against a bucket of 3 a minute: want at least 5 answers 429", nil, nil)
	}
}

func freeAddr(f *fuzzer) string {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		f.t.Fatalf("fuzz: free port: %v", err)
	}
	defer ln.Close()
	return ln.Addr().String()
}
