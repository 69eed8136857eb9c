-- The waiting runs gauge (svc_runs_waiting{kind}, docs/METRICS.md) counts the runs with a
-- wait of each kind. With this index the count is an index-only walk of the kind's entries,
-- stopped at a bound, instead of a scan of the whole waits table for the rarer kind. The
-- table holds only the waits in progress, and a wait's row is written once and deleted once.

-- +goose Up
CREATE INDEX waits_kind_run_idx ON waits (kind, run_id);

-- +goose Down
DROP INDEX waits_kind_run_idx;
