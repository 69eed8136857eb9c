-- A dead replica whose work a sweep has taken over (or found none of) is marked released, so
-- sweeps skip their expensive search while every dead replica is released. A replica that
-- stops gracefully marks itself dead, so work it could not hand back is still found.

-- +goose Up
ALTER TABLE replicas ADD COLUMN released boolean NOT NULL DEFAULT false;

-- +goose Down
ALTER TABLE replicas DROP COLUMN released;
