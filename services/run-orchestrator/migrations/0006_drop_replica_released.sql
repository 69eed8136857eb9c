-- 0005's released mark let sweeps skip their search, but a replica dead by its heartbeat that
-- still fetched work after its release went unswept for up to 30 s (the crash-loop test
-- caught it). Sweeps search every time again; River's short retention of finished jobs keeps
-- that search cheap.

-- +goose Up
ALTER TABLE replicas DROP COLUMN released;

-- +goose Down
ALTER TABLE replicas ADD COLUMN released boolean NOT NULL DEFAULT false;
