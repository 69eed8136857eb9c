-- Run retention (docs/RETENTION.md). Finished runs older than their organization's retention
-- period are deleted by a background sweep on every replica; deleting a run's row removes
-- everything that belongs to it through the ON DELETE CASCADE foreign keys.
--
-- run_retention holds the organizations that chose a period of their own (shorter than or
-- equal to the server's SVC_RUN_RETENTION, which is the longest any run is kept). An
-- organization without a row uses the server's period.
--
-- The sweep finds its candidates through two partial indexes that hold finished runs only:
-- by when they finished, for the server-wide period, and by organization then when they
-- finished, for the organizations with a shorter period. A run gets its entries when it
-- finishes: that update already changes indexed columns (status, status_at), so it was never
-- a HOT update, and the steps before it are unaffected.
--
-- The cascades look the children up by run id: signals and idempotency_keys had no index
-- that leads with it (only the pending signals' one), so each deleted run would scan them
-- whole.

-- +goose Up
CREATE TABLE run_retention (
    organization_id   text PRIMARY KEY,
    retention_seconds bigint NOT NULL CHECK (retention_seconds >= 60),
    updated_at        timestamptz NOT NULL DEFAULT now()
);

CREATE INDEX runs_finished_idx ON runs (finished_at)
    WHERE status IN ('completed', 'failed', 'cancelled');
CREATE INDEX runs_org_finished_idx ON runs (organization_id, finished_at)
    WHERE status IN ('completed', 'failed', 'cancelled');
CREATE INDEX signals_run_idx ON signals (run_id);
CREATE INDEX idempotency_keys_run_idx ON idempotency_keys (run_id);

-- +goose Down
DROP INDEX idempotency_keys_run_idx;
DROP INDEX signals_run_idx;
DROP INDEX runs_org_finished_idx;
DROP INDEX runs_finished_idx;
DROP TABLE run_retention;
