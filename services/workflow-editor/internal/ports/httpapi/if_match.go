package httpapi

import (
	"math"
	"net/http"
	"strconv"
	"strings"

	"svc.dev/proto/errs"
)

// parseIfMatch reads the optional If-Match header: a positive integer, bare (3) or quoted as an
// ETag ("3"). nil when absent. A positive integer too large to be any version is kept as the
// largest one, which then mismatches (412) like any other wrong version.
func parseIfMatch(r *http.Request) (*int64, error) {
	values := r.Header.Values("If-Match")
	if len(values) == 0 {
		return nil, nil
	}
	bad := errs.Newf(errs.InvalidIfMatch, `If-Match must be a positive integer: the version you expect, like 3 or "3" (the ETag of GET /api/workflows/:id)`)
	if len(values) > 1 {
		return nil, bad
	}
	v := strings.TrimSpace(values[0])
	if len(v) >= 2 && v[0] == '"' && v[len(v)-1] == '"' {
		v = v[1 : len(v)-1]
	}
	if v == "" {
		return nil, bad
	}
	for _, c := range v {
		if c < '0' || c > '9' {
			return nil, bad
		}
	}
	n, err := strconv.ParseInt(v, 10, 64)
	if err != nil {
		n = math.MaxInt64 // all digits, so only too large
	}
	if n < 1 {
		return nil, bad
	}
	return &n, nil
}
