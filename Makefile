# Every target loops over the modules of go.work (go has no single command that spans a
# workspace), so adding a module to go.work is all it takes to have it built, tested and linted.
SHELL := /bin/bash
.SHELLFLAGS := -eu -o pipefail -c
.DEFAULT_GOAL := help

MODULES     := $(shell go list -m -f '{{.Path}}')
MODULE_DIRS := $(shell go list -m -f '{{.Dir}}')
ALL_PKGS    := $(addsuffix /...,$(MODULES))
NON_E2E     := $(filter-out svc.dev/e2e/...,$(ALL_PKGS))
GOTESTSUM   := go tool gotestsum --format pkgname-and-test-fails --format-hide-empty-pkg --hide-summary=skipped
TESTFLAGS   ?=
DEVSTACK_FLAGS ?=
VERSION     ?= $(shell git describe --tags --always --dirty 2>/dev/null || echo dev)

.PHONY: help
help: ## list the targets
	@awk 'BEGIN {FS = ":.*## "} /^[a-zA-Z0-9_\/-]+:.*## / {printf "  %-18s %s\n", $$1, $$2}' $(MAKEFILE_LIST)

# devstack is built and run, not `go run`: after a Ctrl-C, `go run` exits 1 whatever the
# program did (its idle build workers take the interrupt for a failed build), and make would
# report an error. Run this way, devstack takes the terminal's foreground (terminal.go), so a
# Ctrl-C reaches it and not make, and make ends with devstack's status: 0 once it stopped
# everything. DEVSTACK_FLAGS passes flags (-only, -no-build, -root, ...).
.PHONY: run
run: ## build and run the whole system on this machine (Ctrl-C stops it; DEVSTACK_FLAGS='-only gateway,identity')
	go build -o .devstack/devstack ./tools/devstack
	exec .devstack/devstack $(DEVSTACK_FLAGS)

.PHONY: test
test: test/unit test/integration ## everything: unit, integration (real Postgres and Redis), e2e

.PHONY: test/unit
test/unit: ## fast tests only (-short: nothing that needs Postgres, Redis or the built system)
	$(GOTESTSUM) -- -short -count=1 $(NON_E2E) $(TESTFLAGS)

.PHONY: test/integration
test/integration: ## all tests against real Postgres and Redis, e2e included
	$(GOTESTSUM) -- -count=1 -p 2 -timeout 30m $(ALL_PKGS) $(TESTFLAGS)

.PHONY: e2e
e2e: ## black-box tests of the whole system through the gateway
	$(GOTESTSUM) -- -count=1 -timeout 30m svc.dev/e2e/... $(TESTFLAGS)

.PHONY: fuzz
fuzz: ## HTTP fuzzing of every public route, full length (SVC_FUZZ_REQUESTS, default 50000); a short run is part of make test
	SVC_FUZZ_REQUESTS=$${SVC_FUZZ_REQUESTS:-50000} $(GOTESTSUM) -- -count=1 -timeout 90m -run 'TestHTTPFuzz' svc.dev/e2e/fuzz

.PHONY: fuzz/native
fuzz/native: ## every Go native fuzz target (parsers of untrusted input), SVC_FUZZ_NATIVE_TIME each (default 20s)
	tools/fuzz-native.sh

.PHONY: chaos
chaos: ## chaos suite, full length (SVC_CHAOS_DURATION, default 10m); a 60-90 s run is part of make test
	SVC_CHAOS_DURATION=$${SVC_CHAOS_DURATION:-10m} $(GOTESTSUM) -- -count=1 -timeout 90m -v -run 'TestChaos' svc.dev/e2e/chaos

.PHONY: isolation
isolation: ## noisy-neighbour run, full length (SVC_ISOLATION_DURATION, default 5m); a ~90 s run is part of make test
	SVC_ISOLATION_DURATION=$${SVC_ISOLATION_DURATION:-5m} $(GOTESTSUM) -- -count=1 -timeout 60m -v -run 'TestIsolation' svc.dev/e2e/chaos

.PHONY: soak
soak: ## soak: steady mixed load, resource growth sampled every 30 s (SVC_SOAK_DURATION, default 30m)
	SVC_SOAK_DURATION=$${SVC_SOAK_DURATION:-30m} $(GOTESTSUM) -- -count=1 -timeout 120m -v -run 'TestSoak' svc.dev/e2e/chaos

.PHONY: console
console: ## rebuild the web console (services/gateway/console) into its committed dist/
	cd services/gateway/console && npm ci --no-audit --no-fund && npm run build

.PHONY: svc
svc: ## build the svc command-line client into bin/svc
	go build -ldflags "-X svc.dev/libs/buildinfo.version=$(VERSION)" -o bin/svc ./tools/svc

.PHONY: bench
bench: ## benchmark scenarios; results are appended to bench/RESULTS.md
	go run ./tools/bench

.PHONY: generate
generate: ## regenerate the Connect/protobuf code under proto/gen
	proto/generate.sh

.PHONY: verify
verify: ## fail when committed generated code is stale or files are not gofmt'ed
	proto/check-generated.sh
	@out=$$(gofmt -l $(MODULE_DIRS)); if [ -n "$$out" ]; then echo "gofmt needed:"; echo "$$out"; exit 1; fi

.PHONY: lint
lint: bin/golangci-lint ## gofmt, go vet and golangci-lint over every module
	@out=$$(gofmt -l $(MODULE_DIRS)); if [ -n "$$out" ]; then echo "gofmt needed:"; echo "$$out"; exit 1; fi
	go vet $(ALL_PKGS)
	bin/golangci-lint run $(addsuffix /...,$(MODULE_DIRS))

# golangci-lint is built from its own modfile (tools/lint.mod), apart from the tools module's
# dependencies; GOWORK=off because -modfile does not mix with a workspace.
bin/golangci-lint: tools/lint.mod tools/lint.sum
	cd tools && GOWORK=off go build -modfile=lint.mod -o ../bin/golangci-lint github.com/golangci/golangci-lint/v2/cmd/golangci-lint

.PHONY: tidy
tidy: ## go mod tidy in every module (and the proto tools' own modfile)
	@for d in $(MODULE_DIRS); do echo "tidy $$d"; (cd $$d && go mod tidy); done
	cd proto && GOWORK=off go mod tidy -modfile=tools.mod
	cd tools && GOWORK=off go mod tidy -modfile=lint.mod
