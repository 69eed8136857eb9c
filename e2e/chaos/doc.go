// Package chaos holds the system's reliability suites (docs/RELIABILITY.md): TestChaos runs a
// mixed workload through the gateway while processes are killed and restarted, Postgres is
// restarted, Redis is flushed and stopped and services are cut apart, then checks the
// invariants of the contract; TestSoak runs the same workload without faults and watches
// resources for unbounded growth; TestIsolation is the noisy-neighbour run, a quiet
// organization's latency measured while another one pushes every limit. All start their own
// private Postgres and Redis (e2e/harness) and every service as a real process. See
// chaos_test.go and isolation_test.go.
package chaos
