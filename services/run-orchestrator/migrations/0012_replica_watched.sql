-- Whether a replica has event streams open (README "Run events, streamed"). A replica's
-- commits are sent to the other replicas (NOTIFY) only while one of them reports streams
-- open: with none open anywhere, a run's changes cost no notification. The heartbeat writes
-- it. The default is true so that a replica of an earlier version, which never writes it, is
-- still notified during a rolling upgrade.

-- +goose Up
ALTER TABLE replicas ADD COLUMN watched boolean NOT NULL DEFAULT true;

-- +goose Down
ALTER TABLE replicas DROP COLUMN watched;
