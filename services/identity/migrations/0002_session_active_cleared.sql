-- A session's active organization is chosen for the user when they have exactly one
-- membership — unless they unset it on purpose with set-active {organizationId:
-- null}, after which domain routes answer no_active_organization until they pick one again.
-- The new column remembers that choice. Reset tokens are pruned per user
-- (identifier) when a new one is issued.

-- +goose Up
ALTER TABLE sessions ADD COLUMN active_organization_cleared boolean NOT NULL DEFAULT false;
CREATE INDEX verifications_identifier_idx ON verifications (identifier);

-- +goose Down
DROP INDEX verifications_identifier_idx;
ALTER TABLE sessions DROP COLUMN active_organization_cleared;
