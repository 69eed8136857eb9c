#!/usr/bin/env bash
# Fails when the generated code in proto/gen/ does not match what the .proto files generate
# (someone edited a .proto without running proto/generate.sh, or edited gen/ by hand).
#
# It generates into a temporary directory and compares, so it never touches the working tree and
# needs no git; a file missing from gen/ or left over in it counts as stale too. Works from any
# directory; the first run builds the pinned tools through `go tool`.
set -euo pipefail

cd "$(dirname "${BASH_SOURCE[0]}")"
export GOWORK=off

tmp="$(mktemp -d)"
trap 'rm -rf "$tmp"' EXIT

buf() { go tool -modfile=tools.mod buf "$@"; }

buf lint
# -o prefixes the template's `out: gen`, so the fresh code lands in $tmp/gen.
buf generate -o "$tmp"

if ! diff -r gen "$tmp/gen"; then
  echo >&2
  echo "proto/gen is stale: it differs from what the .proto files generate (diff above," >&2
  echo "'<' is the current proto/gen, '>' is freshly generated)." >&2
  echo "Run proto/generate.sh and commit the result." >&2
  exit 1
fi
echo "proto/gen is up to date."
