-- What a finished run keeps, cut to what is read once it is over.
--
-- Definitions stored once. Every run carried its pinned workflow definition in runs.definition,
-- the same document again for every run of the same workflow version (most of a small run's
-- row). The documents now live once each in run_definitions, keyed by organization, workflow
-- and the SHA-256 of the document, and a run names its own by runs.definition_hash. A key
-- made of the content rather than of the version means a run always reads back exactly the
-- document it started with, even if two documents ever came under one version number. The
-- dispatch inserts the document (ON CONFLICT DO NOTHING: usually it is there already) in the
-- same transaction and round trip as the runs.
--
-- Deleting a run (DELETE FROM runs WHERE id = ...) leaves its definition in place: others may
-- share it, and no foreign key ties a run to it (a key-share lock on one hot definition row
-- from every start would cost the start path a heap write and, under concurrency, multixacts).
-- A definition no run names any longer is removed by a cleanup that takes a SHARE lock on
-- run_definitions (it waits for the dispatches in flight, whose runs it must see, and holds
-- new ones back until it commits):
--
--     BEGIN;
--     LOCK TABLE run_definitions IN SHARE MODE;
--     DELETE FROM run_definitions d WHERE NOT EXISTS (SELECT 1 FROM runs r
--         WHERE r.organization_id = d.organization_id AND r.workflow_id = d.workflow_id AND r.definition_hash = d.hash);
--     COMMIT;
--
-- (runs_org_workflow_id_idx bounds each check to the runs of the definition's workflow.)
--
-- Block rows go when the run ends. run_blocks is the interpreter's state of a run in
-- progress; nothing reads it for a run that is over (the engine answers a terminal run by its
-- status alone, and the API, logs and streams read step_attempts and run_statuses). The
-- engine deletes a run's rows in the transaction that ends it; this migration deletes those
-- of the runs already over.
--
-- Existing rows move in place. runs.definition is emptied in the same UPDATE that sets the
-- hash and then dropped, so the new row versions no longer carry the documents (the old ones
-- are reclaimed by vacuum). Replicas of the previous version name runs.definition in every
-- dispatch and first read of a run, which then fail: they write nothing during a rolling
-- upgrade, as with 0007.
--
-- The run indexes follow the lists' order. Lists walk a run's organization by id, newest first,
-- optionally narrowed to a workflow or a status; no query orders by created_at. So
-- runs_org_created_idx (organization_id, created_at, id) served nothing and goes, and the
-- workflow's index becomes (organization_id, workflow_id, id) in place of (…, created_at, id),
-- which a walk by id could not use. A status filter gets (organization_id, status, id): without
-- it a page of a rare status read every run of the organization down to the page's last. An
-- update that changes a run's status was already not HOT (status_at and the concurrency
-- index's predicate are indexed), so the new index costs such an update one more entry, and
-- leaves the steps between status changes HOT. docs/QUERY_PLANS.md has the plans.
--
-- Down puts every run's document back into runs.definition and rebuilds the block rows of
-- finished runs from their attempts (status, counts, last attempt and its output); blocks that
-- never had an attempt (skipped ones) are not rebuilt, and nothing reads them for a finished
-- run.

-- +goose Up
CREATE TABLE run_definitions (
    organization_id text NOT NULL,
    workflow_id     text NOT NULL,
    hash            bytea NOT NULL,
    definition      jsonb NOT NULL,
    created_at      timestamptz NOT NULL DEFAULT now(),
    PRIMARY KEY (organization_id, workflow_id, hash)
);

ALTER TABLE runs ADD COLUMN definition_hash bytea;

INSERT INTO run_definitions (organization_id, workflow_id, hash, definition)
SELECT DISTINCT ON (organization_id, workflow_id, h) organization_id, workflow_id, h, definition
FROM (SELECT organization_id, workflow_id, sha256(convert_to(definition::text, 'UTF8')) AS h, definition FROM runs) r
ORDER BY organization_id, workflow_id, h;

ALTER TABLE runs ALTER COLUMN definition DROP NOT NULL;
UPDATE runs SET definition_hash = sha256(convert_to(definition::text, 'UTF8')), definition = NULL;
ALTER TABLE runs ALTER COLUMN definition_hash SET NOT NULL;
ALTER TABLE runs DROP COLUMN definition;

DELETE FROM run_blocks b USING runs r WHERE b.run_id = r.id AND r.status IN ('completed', 'failed', 'cancelled');

DROP INDEX runs_org_created_idx;
DROP INDEX runs_org_workflow_idx;
CREATE INDEX runs_org_workflow_id_idx ON runs (organization_id, workflow_id, id DESC);
CREATE INDEX runs_org_status_id_idx ON runs (organization_id, status, id DESC);

-- +goose Down
DROP INDEX runs_org_status_id_idx;
DROP INDEX runs_org_workflow_id_idx;
CREATE INDEX runs_org_workflow_idx ON runs (organization_id, workflow_id, created_at DESC, id DESC);
CREATE INDEX runs_org_created_idx ON runs (organization_id, created_at DESC, id DESC);
ALTER TABLE runs ADD COLUMN definition jsonb;
UPDATE runs r SET definition = d.definition FROM run_definitions d
WHERE d.organization_id = r.organization_id AND d.workflow_id = r.workflow_id AND d.hash = r.definition_hash;
-- A run whose document was lost (none should be) reads as an empty one: the engine then fails it as unreadable.
UPDATE runs SET definition = '{}' WHERE definition IS NULL;
ALTER TABLE runs ALTER COLUMN definition SET NOT NULL;
ALTER TABLE runs DROP COLUMN definition_hash;
DROP TABLE run_definitions;

INSERT INTO run_blocks (run_id, block_id, status, attempts, lost, attempt_id, output, rev)
SELECT a.run_id, a.block_id,
       CASE WHEN last.status = 'succeeded' THEN 'succeeded' ELSE 'failed' END,
       count(*) FILTER (WHERE a.status <> 'lost'), count(*) FILTER (WHERE a.status = 'lost'),
       last.id, CASE WHEN last.status = 'succeeded' THEN last.output END, r.state_rev
FROM runs r
JOIN step_attempts a ON a.run_id = r.id
JOIN LATERAL (SELECT l.id, l.status, l.output FROM step_attempts l WHERE l.run_id = a.run_id AND l.block_id = a.block_id
              ORDER BY l.attempt DESC LIMIT 1) last ON true
WHERE r.status IN ('completed', 'failed', 'cancelled')
GROUP BY a.run_id, a.block_id, last.id, last.status, last.output, r.state_rev
ON CONFLICT (run_id, block_id) DO NOTHING;
