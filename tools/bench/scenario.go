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
	}
}

// Env is what a scenario gets to work with: where the system is and how hard to push it.
type Env struct {
	GatewayURL  string // public entry point, e.g. http://127.0.0.1:18080
	IdentityURL string // identity straight, bypassing the gateway
	Rate        float64
	Warmup      time.Duration
	Duration    time.Duration
	Generator   *Generator
	Log         func(format string, args ...any) // progress for the person watching
}

// phase is the load of one measured phase at env's rate and durations.
func (e Env) phase(t Target) Phase {
	return Phase{Target: t, Rate: e.Rate, Warmup: e.Warmup, Duration: e.Duration}
}

// Result is one measured phase of a scenario: one row of the results table.
type Result struct {
	Scenario string
	Phase    string
	Stats
	Note string // a finding that spans phases, printed under the table
}
