-- The engine's first working cut: a wait remembers the attempt it ends, and runs are listed
-- newest first by id (ids are time-ordered) within an organization.

-- +goose Up
ALTER TABLE waits ADD COLUMN attempt_id text NOT NULL;
CREATE INDEX runs_org_id_idx ON runs (organization_id, id DESC);

-- +goose Down
DROP INDEX runs_org_id_idx;
ALTER TABLE waits DROP COLUMN attempt_id;
