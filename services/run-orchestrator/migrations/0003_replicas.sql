-- Replica heartbeats (crash safety, docs/ARCHITECTURE.md, The engine): every orchestrator process registers here
-- and refreshes heartbeat_at every second or so. A replica whose heartbeat is older than the
-- dead-after setting is dead: its running attempts become `lost` and its runs continue on a
-- live replica. The partial index keeps the sweeper's look for running attempts cheap.

-- +goose Up
CREATE TABLE replicas (
    id           text PRIMARY KEY,
    host         text NOT NULL,
    pid          integer NOT NULL,
    started_at   timestamptz NOT NULL DEFAULT now(),
    heartbeat_at timestamptz NOT NULL DEFAULT now()
);
CREATE INDEX step_attempts_running_idx ON step_attempts (replica) WHERE status = 'running';

-- +goose Down
DROP INDEX step_attempts_running_idx;
DROP TABLE replicas;
