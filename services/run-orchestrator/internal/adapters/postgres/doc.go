// Package postgres is run-orchestrator's Postgres adapter: the engine's run repository
// (RunStore: one transaction per event on a run, dispatch, the sweep of dead replicas' runs),
// the read side of runs and attempts (RunReader, OrgStatusReader), the replicas' heartbeats
// (Replicas) and the in-process timers of waits due soon (Timers).
package postgres
