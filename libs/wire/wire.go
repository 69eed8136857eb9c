// Package wire holds the conventions every public API of the system shares (docs/API.md,
// Conventions): prefixed time-ordered ids, timestamps with exactly three fractional digits,
// opaque list cursors with their limit rules, and the JSON Pointer issues of an invalid_body
// error.
package wire
