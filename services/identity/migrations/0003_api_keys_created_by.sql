-- The ceiling on API keys per user (SVC_MAX_API_KEYS_PER_USER) counts the keys a user
-- created, in any organization, every time one is created: the count needs an index on the
-- creator. Keys per organization use api_keys_reference_id_idx and memberships per user
-- members_user_id_idx, both already there.

-- +goose Up
CREATE INDEX api_keys_created_by_idx ON api_keys (created_by);

-- +goose Down
DROP INDEX api_keys_created_by_idx;
