-- The durable engine's own records (docs/ARCHITECTURE.md, The engine): runs with their pinned definition and
-- interpreter state, one row per step attempt, waits, buffered signals and idempotency keys.
-- River's job tables are migrated into this schema by River itself.

-- +goose Up
CREATE TABLE runs (
    id               text PRIMARY KEY,
    organization_id  text NOT NULL,
    workflow_id      text NOT NULL,
    workflow_version integer NOT NULL,
    definition       jsonb NOT NULL,
    input            jsonb NOT NULL DEFAULT 'null',
    output           jsonb,
    error            jsonb,
    status           text NOT NULL CHECK (status IN ('queued', 'running', 'waiting', 'completed', 'failed', 'cancelled')),
    trigger          jsonb NOT NULL,
    state            jsonb NOT NULL DEFAULT '{}',
    -- Last value of the per-run change sequence that orders the logs.
    change_seq       bigint NOT NULL DEFAULT 0,
    created_at       timestamptz NOT NULL DEFAULT now(),
    started_at       timestamptz,
    finished_at      timestamptz,
    updated_at       timestamptz NOT NULL DEFAULT now()
);
CREATE INDEX runs_org_created_idx ON runs (organization_id, created_at DESC, id DESC);
CREATE INDEX runs_org_workflow_idx ON runs (organization_id, workflow_id, created_at DESC, id DESC);

CREATE TABLE step_attempts (
    id          text PRIMARY KEY,
    run_id      text NOT NULL REFERENCES runs (id) ON DELETE CASCADE,
    block_id    text NOT NULL,
    type        text NOT NULL,
    attempt     integer NOT NULL CHECK (attempt > 0),
    status      text NOT NULL CHECK (status IN ('running', 'succeeded', 'failed', 'cancelled', 'lost')),
    input       jsonb,
    output      jsonb,
    error       jsonb,
    replica     text NOT NULL,
    -- Moves to the run's next change_seq on every change, so a follower sees every change once.
    seq         bigint NOT NULL,
    started_at  timestamptz NOT NULL,
    finished_at timestamptz,
    UNIQUE (run_id, block_id, attempt),
    UNIQUE (run_id, seq)
);

CREATE TABLE waits (
    run_id      text NOT NULL REFERENCES runs (id) ON DELETE CASCADE,
    block_id    text NOT NULL,
    kind        text NOT NULL CHECK (kind IN ('sleep', 'signal')),
    signal_name text,
    wake_at     timestamptz,
    created_at  timestamptz NOT NULL DEFAULT now(),
    PRIMARY KEY (run_id, block_id)
);
CREATE INDEX waits_wake_at_idx ON waits (wake_at) WHERE wake_at IS NOT NULL;

CREATE TABLE signals (
    id          text PRIMARY KEY,
    run_id      text NOT NULL REFERENCES runs (id) ON DELETE CASCADE,
    name        text NOT NULL,
    payload     jsonb,
    consumed_by text,
    consumed_at timestamptz,
    created_at  timestamptz NOT NULL DEFAULT now()
);
CREATE INDEX signals_pending_idx ON signals (run_id, name, created_at) WHERE consumed_at IS NULL;

CREATE TABLE idempotency_keys (
    organization_id text NOT NULL,
    key             text NOT NULL,
    run_id          text NOT NULL REFERENCES runs (id) ON DELETE CASCADE,
    created_at      timestamptz NOT NULL DEFAULT now(),
    PRIMARY KEY (organization_id, key)
);

-- +goose Down
DROP TABLE idempotency_keys;
DROP TABLE signals;
DROP TABLE waits;
DROP TABLE step_attempts;
DROP TABLE runs;
