-- Cron schedules and their fires. A fire row per (schedule, cutoff) is the exactly-once
-- claim, and while its status is pending it is also the outbox entry a later tick retries.

-- +goose Up
CREATE TABLE schedules (
    id              text PRIMARY KEY,
    organization_id text NOT NULL,
    workflow_id     text NOT NULL,
    cron            text NOT NULL,
    timezone        text NOT NULL DEFAULT 'UTC',
    input           jsonb NOT NULL DEFAULT 'null',
    enabled         boolean NOT NULL DEFAULT true,
    last_fired_at   timestamptz,
    next_fire_at    timestamptz,
    created_at      timestamptz NOT NULL DEFAULT now(),
    updated_at      timestamptz NOT NULL DEFAULT now()
);
CREATE INDEX schedules_due_idx ON schedules (next_fire_at) WHERE enabled;
CREATE INDEX schedules_org_created_idx ON schedules (organization_id, created_at DESC, id DESC);

CREATE TABLE schedule_fires (
    schedule_id     text NOT NULL REFERENCES schedules (id) ON DELETE CASCADE,
    cutoff          timestamptz NOT NULL,
    organization_id text NOT NULL,
    workflow_id     text NOT NULL,
    status          text NOT NULL CHECK (status IN ('pending', 'dispatched', 'failed')),
    run_id          text,
    error           text,
    attempts        integer NOT NULL DEFAULT 0,
    created_at      timestamptz NOT NULL DEFAULT now(),
    updated_at      timestamptz NOT NULL DEFAULT now(),
    PRIMARY KEY (schedule_id, cutoff)
);
CREATE INDEX schedule_fires_pending_idx ON schedule_fires (created_at) WHERE status = 'pending';

-- +goose Down
DROP TABLE schedule_fires;
DROP TABLE schedules;
