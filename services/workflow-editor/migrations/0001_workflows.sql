-- Workflows of every organization. The definition is one JSON document of blocks and edges;
-- version grows by one per write that changed something, for If-Match.

-- +goose Up
CREATE TABLE workflows (
    id              text PRIMARY KEY,
    organization_id text NOT NULL,
    name            text NOT NULL CHECK (char_length(name) BETWEEN 1 AND 200),
    description     text NOT NULL DEFAULT '',
    version         integer NOT NULL DEFAULT 1 CHECK (version > 0),
    definition      jsonb NOT NULL DEFAULT '{"blocks": [], "edges": []}',
    created_at      timestamptz NOT NULL DEFAULT now(),
    updated_at      timestamptz NOT NULL DEFAULT now(),
    UNIQUE (organization_id, name)
);
-- Lists are newest first within one organization.
CREATE INDEX workflows_org_created_idx ON workflows (organization_id, created_at DESC, id DESC);

-- +goose Down
DROP TABLE workflows;
