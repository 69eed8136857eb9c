// Package layering holds the test of the one import rule of the service skeleton that
// golangci-lint's depguard cannot express: an adapter does not import another adapter
// (docs/adr/0009-one-service-skeleton.md). The other rules are depguard's, in .golangci.yml.
package layering
