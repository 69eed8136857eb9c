package postgres

import (
	"context"
	"errors"
	"fmt"

	"github.com/jackc/pgx/v5"
)

// The statements behind port.Ceilings. A ceiling is checked by locking one row (the user's or
// the organization's) and only then counting, in a statement of its own: under READ
// COMMITTED that count sees every row committed by whoever held the lock before, so two
// concurrent inserts under one ceiling are serialised and cannot both pass it. FOR NO KEY
// UPDATE does not block the foreign-key checks (FOR KEY SHARE) of other inserts referring to
// the row, only other checks of the same ceiling and updates of the row itself.
const (
	lockUserRow         = `SELECT id FROM users WHERE id = $1 FOR NO KEY UPDATE`
	lockOrganizationRow = `SELECT id FROM organizations WHERE id = $1 FOR NO KEY UPDATE`
	countMemberships    = `SELECT count(*) FROM members WHERE user_id = $1`
	countKeysOfOrg      = `SELECT count(*) FROM api_keys WHERE reference_id = $1`
	countKeysOfUser     = `SELECT count(*) FROM api_keys WHERE created_by = $1`
)

// hasRoom locks the row lockRow names by id, then reports whether fewer than ceiling rows
// match countRows for id. A row that does not exist has room: the insert that follows then
// fails on its foreign key, as it did before there were ceilings. It must run in a
// transaction, which holds the lock until the insert commits.
func hasRoom(ctx context.Context, tx pgx.Tx, lockRow, countRows, id string, ceiling int) (bool, error) {
	var locked string
	if err := tx.QueryRow(ctx, lockRow, id).Scan(&locked); err != nil {
		if errors.Is(err, pgx.ErrNoRows) {
			return true, nil
		}
		return false, fmt.Errorf("lock for ceiling: %w", err)
	}
	var n int
	if err := tx.QueryRow(ctx, countRows, id).Scan(&n); err != nil {
		return false, fmt.Errorf("count for ceiling: %w", err)
	}
	return n < ceiling, nil
}
