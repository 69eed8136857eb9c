-- A revision of runs.state, moved on by every write of it: a worker that holds a run between
-- its transactions keeps the state it last wrote and reads it again only when someone else
-- (a signal, a cancel, a parallel block's worker, the sweeper) has changed it.

-- +goose Up
ALTER TABLE runs ADD COLUMN state_rev bigint NOT NULL DEFAULT 0;

-- +goose Down
ALTER TABLE runs DROP COLUMN state_rev;
