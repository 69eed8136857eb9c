-- A fire carries what its dispatch needs (the input at the moment of the claim) and when its
-- next dispatch attempt is due, so a tick never retries in a loop what just failed.

-- +goose Up
ALTER TABLE schedule_fires ADD COLUMN input jsonb NOT NULL DEFAULT 'null';
ALTER TABLE schedule_fires ADD COLUMN next_attempt_at timestamptz NOT NULL DEFAULT now();
DROP INDEX schedule_fires_pending_idx;
CREATE INDEX schedule_fires_pending_idx ON schedule_fires (next_attempt_at) WHERE status = 'pending';
CREATE INDEX schedules_org_workflow_created_idx ON schedules (organization_id, workflow_id, created_at DESC, id DESC);

-- +goose Down
DROP INDEX schedules_org_workflow_created_idx;
DROP INDEX schedule_fires_pending_idx;
CREATE INDEX schedule_fires_pending_idx ON schedule_fires (created_at) WHERE status = 'pending';
ALTER TABLE schedule_fires DROP COLUMN next_attempt_at;
ALTER TABLE schedule_fires DROP COLUMN input;
