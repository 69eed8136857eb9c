// Package chaos holds the system's reliability suites, described in docs/RELIABILITY.md:
// TestChaos (a mixed workload under killed processes, restarted Postgres, flushed or stopped
// Redis and cut links, then the API's invariants checked), TestSoak (the same workload without
// faults, watching for unbounded growth) and TestIsolation (a quiet organization's latency
// while a noisy one pushes every limit). Each starts its own Postgres, Redis and services.
package chaos
