-- A ready block records that a job was queued for it, so a fan-out of k blocks queues k-1 jobs
-- rather than one more per job that finds several blocks ready (about k²/2).

-- +goose Up
ALTER TABLE run_blocks ADD COLUMN queued boolean NOT NULL DEFAULT false;

-- +goose Down
ALTER TABLE run_blocks DROP COLUMN queued;
