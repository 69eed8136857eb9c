#!/usr/bin/env bash
# pgbench-step.sh [CLIENT_COUNT...]
#
# The floor under every engine figure in bench/RESULTS.md: how many transactions per second
# this machine's PostgreSQL commits when each one does the least a durable step needs, namely
# insert one row (the attempt) and update one row (the run). tools/bench runs it before its
# scenarios; it can also be run alone.
#
# For each client count (default 1 4 16) it recreates a scratch schema, runs pgbench for
# SECONDS_PER_RUN seconds and prints one line:
#
#   pgbench clients=<n> tps=<tps> p50_ms=<median latency> p99_ms=<99th percentile latency>
#
# Connection: PGHOST (default 127.0.0.1), PGUSER (postgres), PGDATABASE (postgres).
set -euo pipefail

export PGHOST="${PGHOST:-127.0.0.1}"
export PGUSER="${PGUSER:-postgres}"
export PGDATABASE="${PGDATABASE:-postgres}"
export PGOPTIONS="-c client_min_messages=warning"
seconds="${SECONDS_PER_RUN:-15}"
schema=bench_step_floor

work="$(mktemp -d)"
cleanup() {
	psql -q -c "DROP SCHEMA IF EXISTS ${schema} CASCADE" >/dev/null 2>&1 || true
	rm -rf "$work"
}
trap cleanup EXIT

# prepare: a fresh schema, 10,000 rows to update, statistics and a checkpoint so that every
# client count starts from the same state.
prepare() {
	psql -q -v ON_ERROR_STOP=1 >/dev/null <<SQL
DROP SCHEMA IF EXISTS ${schema} CASCADE;
CREATE SCHEMA ${schema};
CREATE TABLE ${schema}.attempt (id bigserial PRIMARY KEY, run int NOT NULL, at timestamptz NOT NULL DEFAULT now());
CREATE TABLE ${schema}.run (id int PRIMARY KEY, steps bigint NOT NULL DEFAULT 0);
INSERT INTO ${schema}.run (id) SELECT n FROM generate_series(1, 10000) AS n;
VACUUM ANALYZE ${schema}.run;
CHECKPOINT;
SQL
}

# One transaction: one insert, one update of a random row, one commit.
cat >"$work/step.sql" <<SQL
\set run random(1, 10000)
BEGIN;
INSERT INTO ${schema}.attempt (run) VALUES (:run);
UPDATE ${schema}.run SET steps = steps + 1 WHERE id = :run;
COMMIT;
SQL

# percentile P of the sorted latencies (microseconds, one a line) in FILE, printed in ms.
percentile() {
	awk -v p="$1" '{ v[NR] = $1 } END {
		if (NR == 0) { print "nan"; exit }
		k = int(p * NR); if (k < p * NR) k++; if (k < 1) k = 1
		printf "%.3f", v[k] / 1000
	}' "$2"
}

for clients in ${@:-1 4 16}; do
	prepare
	threads=$((clients < 2 ? clients : 2))
	rm -f "$work"/log.*
	summary="$(cd "$work" && pgbench -n -M prepared -f step.sql -c "$clients" -j "$threads" \
		-T "$seconds" --log --log-prefix "$work/log" 2>&1)"
	tps="$(printf '%s\n' "$summary" | sed -n 's/^tps = \([0-9.]*\).*/\1/p' | head -n 1)"
	# pgbench's per-transaction log: the third field is the latency in microseconds.
	cat "$work"/log.* | awk '{ print $3 }' | sort -n >"$work/latencies"
	echo "pgbench clients=${clients} tps=${tps} p50_ms=$(percentile 0.50 "$work/latencies") p99_ms=$(percentile 0.99 "$work/latencies")"
done
