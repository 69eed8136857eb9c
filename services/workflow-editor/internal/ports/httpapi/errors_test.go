package httpapi

import (
	"fmt"
	"net/http"
	"testing"

	"github.com/jackc/pgx/v5/pgconn"
	"github.com/stretchr/testify/require"
)

// TestStoreUnavailableIs503: a patch or read that fails because Postgres is restarting answers
// 503 unavailable (clients retry), not 500 internal (the chaos suite saw POST
// /api/workflows/:id/operations answer 500 during a Postgres restart).
func TestStoreUnavailableIs503(t *testing.T) {
	t.Parallel()
	err := fmt.Errorf("apply ops: %w", &pgconn.PgError{Code: "57P01", Message: "terminating connection due to administrator command"})
	e := toAppError(err)
	require.Equal(t, http.StatusServiceUnavailable, e.Status())
	require.Equal(t, "unavailable", string(e.Code))
	require.Equal(t, http.StatusInternalServerError, toAppError(fmt.Errorf("boom")).Status())
}
