package web

import (
	"context"
	"net/http"
	"sync"
	"time"
)

// Health answers 200 {"status":"ok","version":...} always: it says the process serves, not
// that its dependencies do (that is /ready).
func Health(version string) http.HandlerFunc {
	body := map[string]string{"status": "ok", "version": version}
	return func(w http.ResponseWriter, _ *http.Request) { WriteJSON(w, http.StatusOK, body) }
}

// Check tells whether one dependency answers.
type Check func(ctx context.Context) error

// Ready runs every check at once, each within timeout, and answers 200 {"status":"ok",
// "checks":{...}} when all pass or 503 {"status":"unavailable","checks":{...}} naming the
// failing ones. Failure text stays generic: /ready is unauthenticated.
func Ready(timeout time.Duration, checks map[string]Check) http.HandlerFunc {
	return ReadyWithOptional(timeout, checks, nil)
}

// ReadyWithOptional is Ready for a service that keeps serving, degraded, without some
// dependencies: a failing optional check is reported ("status":"degraded", still 200), so
// that an orchestrator does not take every replica out of service for it.
func ReadyWithOptional(timeout time.Duration, required, optional map[string]Check) http.HandlerFunc {
	return func(w http.ResponseWriter, r *http.Request) {
		ctx, cancel := context.WithTimeout(r.Context(), timeout)
		defer cancel()
		results := map[string]string{}
		var mu sync.Mutex
		var wg sync.WaitGroup
		run := func(checks map[string]Check) {
			for name, check := range checks {
				wg.Go(func() {
					res := "ok"
					if err := check(ctx); err != nil {
						res = "unavailable"
					}
					mu.Lock()
					results[name] = res
					mu.Unlock()
				})
			}
		}
		run(required)
		run(optional)
		wg.Wait()
		status, code := "ok", http.StatusOK
		for name := range optional {
			if results[name] != "ok" {
				status = "degraded"
			}
		}
		for name := range required {
			if results[name] != "ok" {
				status, code = "unavailable", http.StatusServiceUnavailable
			}
		}
		WriteJSON(w, code, map[string]any{"status": status, "checks": results})
	}
}
