package main

import (
	"context"
	"time"
)

// Scenario is one thing bench measures. Run drives load through env's generator and returns one
// Result per measured phase; a scenario that compares phases says what it found in a Note.
type Scenario interface {
	Name() string
	Run(ctx context.Context, env Env) ([]Result, error)
}

// allScenarios lists every scenario in the order a full run takes them. New scenarios are
// added here.
func allScenarios() []Scenario {
	return []Scenario{
		gatewayProxy{},
		guardReject{},
		guardOverhead{},
		patch100Ops{},
		patch1000Blocks{},
		runStart{},
		chain40{},
		scheduleTick{},
		runStartMax{},
		chain40Slow{},
		chain40HTTP{},
		riverChain40{},
		chain400{},
		stepRate{},
		firstAttempt{},
		closedLoop16{},
		sleepLateness{},
		signalResume{},
		waitingRSS{},
		webhookDelivery{},
		eventLatency{},
		runBytesScenario{},
		depth{},
		sweep{},
	}
}

// rated is a scenario whose load has a rate of its own when -rate is not given: one whose
// requests are too heavy for the rate of the light ones on this machine.
type rated interface {
	DefaultRate() float64
}

// Env is what a scenario gets to work with: where the system is and how hard to push it.
type Env struct {
	GatewayURL  string // public entry point, e.g. http://127.0.0.1:18080
	IdentityURL string // identity straight, bypassing the gateway
	EditorURL   string // workflow-editor straight, bypassing the gateway
	// InternalSecret is the system's SVC_INTERNAL_SECRET, for requests signed as the gateway
	// signs them; empty when bench does not know it.
	InternalSecret string
	// Origin is trusted by identity, for the mutating /api/auth/* calls of a scenario's setup.
	Origin string
	// Earlier holds the results of the scenarios that ran before this one in the same run, for
	// a scenario that compares with them.
	Earlier []Result
	// Baseline is the pgbench lines of this run ("pgbench clients=N tps=… …"); empty when it
	// was skipped or failed.
	Baseline  []string
	Rate      float64 // this scenario's rate: -scenario-rate, -rate, its own default, 500
	Warmup    time.Duration
	Duration  time.Duration
	Generator *Generator
	// CPU measures the CPU of the system's processes over a measured window; nil measures
	// nothing. Phases of env.phase get it; a scenario with a window of its own uses it itself.
	CPU *cpuMeter
	Log func(format string, args ...any) // progress for the person watching
	// DatabaseURL is the system's Postgres database, for the scenarios that read the
	// orchestrator's tables (run-bytes, depth, sweep); DepthRuns is what depth loads there,
	// SweepRuns what sweep does.
	DatabaseURL string
	DepthRuns   int
	SweepRuns   int
	// ChainPoll is how often the sequential chains poll their run (-chain-poll): the client's
	// time resolution, and load of its own on the machine the run shares.
	ChainPoll time.Duration
}

// phase is the load of one measured phase at env's rate and durations.
func (e Env) phase(t Target) Phase {
	return Phase{Target: t, Rate: e.Rate, Warmup: e.Warmup, Duration: e.Duration, CPU: e.CPU}
}

// Result is one measured phase of a scenario: one row of the results table.
type Result struct {
	Scenario string
	Phase    string
	Stats
	Note string // a finding that spans phases, printed under the table
}
