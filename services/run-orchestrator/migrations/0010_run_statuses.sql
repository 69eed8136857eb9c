-- The status log: one row per status a run went through after it was queued, at the change
-- sequence the engine gave the change (a status change takes a sequence of its own, so the
-- rows and the attempts' sequences never collide). The event stream replays it, so a client
-- resuming with Last-Event-ID sees every status (waiting, then running again), not only the
-- latest. Every run starts queued at sequence 0: that first status is not stored.
--
-- Runs already past queued get one row, their present status at their present sequence (a
-- stream that resumes across the upgrade sees where the run is, as before).

-- +goose Up
CREATE TABLE run_statuses (
    run_id      text        NOT NULL REFERENCES runs (id) ON DELETE CASCADE,
    seq         bigint      NOT NULL,
    status      text        NOT NULL,
    wait_block  text,
    wait_kind   text,
    wake_at     timestamptz,
    signal_name text,
    at          timestamptz NOT NULL,
    PRIMARY KEY (run_id, seq)
);

INSERT INTO run_statuses (run_id, seq, status, wait_block, wait_kind, wake_at, signal_name, at)
SELECT r.id, r.change_seq, r.status, w.block_id, w.kind, w.wake_at, w.signal_name, r.updated_at
FROM runs r
LEFT JOIN LATERAL (SELECT block_id, kind, wake_at, signal_name FROM waits
                   WHERE run_id = r.id AND r.status = 'waiting' ORDER BY created_at LIMIT 1) w ON true
WHERE r.status <> 'queued' OR r.change_seq > 0;

-- +goose Down
DROP TABLE run_statuses;
