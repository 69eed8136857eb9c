-- Per-workflow concurrency (README "Concurrency per workflow and key"). A run whose pinned
-- trigger declares concurrency {limit, key?} belongs to the group (organization, workflow,
-- key value) and carries its key and limit; admitted says whether it holds (or held) one of
-- the group's slots. A run held back is queued and not admitted; it has no job until a run of
-- its group ends and admits it, in that run's ending transaction. Runs without a limit have no
-- key and are admitted (the default: nothing changes for them, and the column costs no
-- rewrite).
--
-- The index holds only the runs of limited workflows that are not terminal, so "how many of
-- this group are in progress" (admitted) and "which run of this group is next" (not admitted,
-- oldest id first) are each one short range of it.
-- The queue column of the status log holds why a run was held back ({reason, key, limit,
-- in_progress}) on the queued status logged when it was.

-- +goose Up
ALTER TABLE runs
    ADD COLUMN concurrency_key   text,
    ADD COLUMN concurrency_limit integer,
    ADD COLUMN admitted          boolean NOT NULL DEFAULT true;
CREATE INDEX runs_concurrency_idx ON runs (organization_id, workflow_id, concurrency_key, admitted, id)
    WHERE concurrency_key IS NOT NULL AND status IN ('queued', 'running', 'waiting');
ALTER TABLE run_statuses ADD COLUMN queue jsonb;

-- +goose Down
ALTER TABLE run_statuses DROP COLUMN queue;
DROP INDEX runs_concurrency_idx;
ALTER TABLE runs DROP COLUMN admitted, DROP COLUMN concurrency_limit, DROP COLUMN concurrency_key;
