-- When each run took its present status, for the organization's event stream to catch up on
-- the statuses a lost notification did not bring (internal/adapters/postgres/org_statuses.go).
--
-- A column of its own rather than an index on updated_at: updated_at moves on every step's
-- write, and an index on it would make every one of those updates a non-HOT update (a new
-- entry in each of the table's indexes). status_at moves only when the status does, so the
-- steps between status changes stay HOT. The trigger sets it, with now() (the writing
-- transaction's start, the same clock as updated_at), only when the status changes: the write
-- path is unchanged. A new run takes now() as its default.
--
-- Existing runs read -infinity (a fast default, no table rewrite): they changed before any
-- stream that could catch up on them was opened.

-- +goose Up
ALTER TABLE runs ADD COLUMN status_at timestamptz NOT NULL DEFAULT '-infinity';
ALTER TABLE runs ALTER COLUMN status_at SET DEFAULT now();
CREATE INDEX runs_org_status_at_idx ON runs (organization_id, status_at, id);

-- +goose StatementBegin
CREATE FUNCTION runs_status_at() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
    NEW.status_at := now();
    RETURN NEW;
END
$$;
-- +goose StatementEnd

CREATE TRIGGER runs_status_at BEFORE UPDATE OF status ON runs
    FOR EACH ROW WHEN (OLD.status IS DISTINCT FROM NEW.status) EXECUTE FUNCTION runs_status_at();

-- +goose Down
DROP TRIGGER runs_status_at ON runs;
DROP FUNCTION runs_status_at();
DROP INDEX runs_org_status_at_idx;
ALTER TABLE runs DROP COLUMN status_at;
