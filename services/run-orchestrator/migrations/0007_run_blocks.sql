-- Per-block storage of the interpreter state. runs.state was one JSON document the
-- engine rewrote whole on every step, so a step of a 400-block run cost more than one of a
-- 40-block run. Each block now has a row, and a step writes only the rows it changed. rev is
-- the run's state_rev when the row was last written: a worker that keeps a run between its
-- transactions reads back only the rows someone else wrote since (rev above its own).
--
-- Runs move in place. Each block of runs.state becomes a row; the attempt a block has in
-- flight (a running step attempt, or the wait's) and its wait are taken from step_attempts
-- and waits. A run whose state is not an object could not be read by the engine either: a
-- run still going is failed with that reason, as the engine fails a run it cannot read.
--
-- Dropping runs.state also fences replicas of the previous version off during a rolling
-- upgrade: every statement they make on a run names that column and fails, so they write
-- nothing; their jobs are retried by the new replicas, which take the blocks back (an attempt
-- such a job had in flight is recorded lost, as a crashed replica's is).

-- +goose Up
CREATE TABLE run_blocks (
    run_id     text NOT NULL REFERENCES runs (id) ON DELETE CASCADE,
    block_id   text NOT NULL,
    status     text NOT NULL DEFAULT '',
    attempts   integer NOT NULL DEFAULT 0,
    lost       integer NOT NULL DEFAULT 0,
    job        bigint NOT NULL DEFAULT 0,
    attempt_id text,
    in_flight  boolean NOT NULL DEFAULT false,
    retry_at   timestamptz,
    wait       jsonb,
    output     jsonb,
    rev        bigint NOT NULL,
    PRIMARY KEY (run_id, block_id)
);
CREATE INDEX run_blocks_rev_idx ON run_blocks (run_id, rev);

-- A state the previous engine could read: an object whose blocks (if any) are objects with a
-- string status and small whole numbers for attempts, lost and job.
CREATE TEMPORARY TABLE readable_runs ON COMMIT DROP AS
SELECT r.id FROM runs r
WHERE jsonb_typeof(r.state) = 'object'
  AND coalesce(jsonb_typeof(r.state->'blocks'), 'null') IN ('object', 'null')
  AND NOT EXISTS (
      SELECT 1 FROM jsonb_each(CASE WHEN jsonb_typeof(r.state->'blocks') = 'object' THEN r.state->'blocks' ELSE '{}' END) b
      WHERE jsonb_typeof(b.value) <> 'object'
         OR coalesce(jsonb_typeof(b.value->'status'), 'null') NOT IN ('string', 'null')
         OR EXISTS (SELECT 1 FROM unnest(ARRAY['attempts', 'lost', 'job']) k
                    WHERE coalesce(jsonb_typeof(b.value->k), 'null') <> 'null'
                      AND NOT (jsonb_typeof(b.value->k) = 'number' AND b.value->>k ~ '^[0-9]{1,9}$')));

INSERT INTO run_blocks (run_id, block_id, status, attempts, lost, job, attempt_id, in_flight, wait, output, rev)
SELECT r.id, b.key, coalesce(b.value->>'status', ''), coalesce((b.value->>'attempts')::integer, 0),
       coalesce((b.value->>'lost')::integer, 0), coalesce((b.value->>'job')::bigint, 0),
       coalesce(running.id, latest.id), running.id IS NOT NULL,
       w.wait, b.value->'output', r.state_rev
FROM runs r
CROSS JOIN LATERAL jsonb_each(r.state->'blocks') b
LEFT JOIN LATERAL (SELECT a.id FROM step_attempts a WHERE a.run_id = r.id AND a.block_id = b.key AND a.status = 'running'
                   ORDER BY a.attempt DESC LIMIT 1) running ON true
LEFT JOIN LATERAL (SELECT a.id FROM step_attempts a WHERE a.run_id = r.id AND a.block_id = b.key
                   ORDER BY a.attempt DESC LIMIT 1) latest ON true
LEFT JOIN LATERAL (SELECT jsonb_strip_nulls(jsonb_build_object('kind', w.kind, 'signal', w.signal_name, 'wake_at', w.wake_at,
                          'since', w.created_at, 'seq', coalesce(a.seq, 0))) AS wait
                   FROM waits w LEFT JOIN step_attempts a ON a.id = w.attempt_id
                   WHERE w.run_id = r.id AND w.block_id = b.key) w ON true
WHERE r.id IN (SELECT id FROM readable_runs) AND jsonb_typeof(r.state->'blocks') = 'object';

-- A run still going whose state cannot be read is failed, as the engine fails a run it cannot
-- read: its attempts still running fail with the reason, each taking the run's next change
-- sequence.
CREATE TEMPORARY TABLE unreadable_runs ON COMMIT DROP AS
SELECT id FROM runs WHERE status NOT IN ('completed', 'failed', 'cancelled') AND id NOT IN (SELECT id FROM readable_runs);
UPDATE step_attempts a SET status = 'failed', finished_at = now(), seq = r.change_seq + n.n,
       error = '{"message": "the run cannot go on: its stored state could not be read when it moved to per-block storage", "code": "run_unreadable"}'
FROM (SELECT id, run_id, row_number() OVER (PARTITION BY run_id ORDER BY seq) AS n FROM step_attempts
      WHERE status = 'running' AND run_id IN (SELECT id FROM unreadable_runs)) n
JOIN runs r ON r.id = n.run_id
WHERE a.id = n.id;
UPDATE runs r SET status = 'failed', finished_at = now(), updated_at = now(),
       change_seq = greatest(r.change_seq, coalesce((SELECT max(seq) FROM step_attempts a WHERE a.run_id = r.id), 0)),
       error = jsonb_build_object('block_id', '', 'message', 'the run cannot go on: its stored state could not be read when it moved to per-block storage')
WHERE r.id IN (SELECT id FROM unreadable_runs);
DELETE FROM waits w USING runs r WHERE w.run_id = r.id AND r.status IN ('completed', 'failed', 'cancelled');

ALTER TABLE runs DROP COLUMN state;

-- +goose Down
ALTER TABLE runs ADD COLUMN state jsonb NOT NULL DEFAULT '{}';
UPDATE runs r SET state = jsonb_build_object('blocks', coalesce((
    SELECT jsonb_object_agg(b.block_id, jsonb_strip_nulls(jsonb_build_object('status', nullif(b.status, ''),
        'attempts', nullif(b.attempts, 0), 'lost', nullif(b.lost, 0), 'job', nullif(b.job, 0), 'output', b.output)))
    FROM run_blocks b WHERE b.run_id = r.id), '{}'));
DROP TABLE run_blocks;
