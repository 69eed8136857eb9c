// Package fuzz fuzzes every public HTTP route of the running system through the gateway. The
// requests are generated at test time from the OpenAPI document (proto/openapi/svc.yaml): valid
// ones, boundary values and mutations, from a seeded random source that a failing run prints
// and SVC_FUZZ_SEED replays. See TestHTTPFuzz.
package fuzz
