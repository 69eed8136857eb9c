-- The run event stream (GET /api/runs/:id/events) is derived from step_attempts alone, so that
-- any replica, and a client resuming with Last-Event-ID, reads the same events: an attempt's
-- row keeps the change sequence it started at (its attempt.started event) besides its latest
-- one (seq), and a failed attempt that will be retried keeps when (its retry_at).

-- +goose Up
ALTER TABLE step_attempts ADD COLUMN started_seq bigint, ADD COLUMN retry_at timestamptz;

-- +goose Down
ALTER TABLE step_attempts DROP COLUMN started_seq, DROP COLUMN retry_at;
